-- The service's first schema. {{autoid}} and {{blob}} are the dialect's
-- auto-increment primary key and byte string types. Times are Unix
-- microseconds in UTC; NULL is the zero time. JSON lives in TEXT columns,
-- where NULL is a nil slice or pointer.

CREATE TABLE users (
	id {{autoid}},
	name TEXT NOT NULL UNIQUE,
	password_hash TEXT NOT NULL,
	created BIGINT NOT NULL
);

CREATE TABLE tokens (
	id {{autoid}},
	user_id BIGINT NOT NULL REFERENCES users (id),
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL UNIQUE,
	created BIGINT NOT NULL,
	expires BIGINT,
	last_used BIGINT,
	revoked BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE endpoints (
	id TEXT PRIMARY KEY,
	owner_id BIGINT NOT NULL REFERENCES users (id),
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	servers TEXT, -- NULL: none
	auth TEXT NOT NULL,
	default_dir TEXT NOT NULL,
	public BOOLEAN NOT NULL,
	max_concurrent INTEGER NOT NULL,
	created BIGINT NOT NULL,
	UNIQUE (owner_id, name)
);

CREATE TABLE activations (
	user_id BIGINT NOT NULL REFERENCES users (id),
	endpoint_id TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
	sealed {{blob}} NOT NULL,
	expires BIGINT NOT NULL,
	created BIGINT NOT NULL,
	PRIMARY KEY (user_id, endpoint_id)
);

-- Endpoints are referenced by ID but not by key: the history of a task
-- outlives its endpoints.
CREATE TABLE tasks (
	num {{autoid}}, -- insertion order: breaks ties of request_time
	id TEXT NOT NULL UNIQUE,
	user_id BIGINT NOT NULL REFERENCES users (id),
	submission_id TEXT, -- NULL: none
	type TEXT NOT NULL,
	label TEXT NOT NULL,
	status TEXT NOT NULL,
	nice_status TEXT NOT NULL,
	fatal_error TEXT,
	src_endpoint TEXT NOT NULL,
	dst_endpoint TEXT NOT NULL,
	items TEXT, -- NULL: none
	options TEXT NOT NULL,
	deadline BIGINT,
	request_time BIGINT NOT NULL,
	start_time BIGINT,
	completion_time BIGINT,
	files BIGINT NOT NULL DEFAULT 0,
	directories BIGINT NOT NULL DEFAULT 0,
	files_transferred BIGINT NOT NULL DEFAULT 0,
	files_skipped BIGINT NOT NULL DEFAULT 0,
	files_failed BIGINT NOT NULL DEFAULT 0,
	bytes_transferred BIGINT NOT NULL DEFAULT 0,
	bytes_checksummed BIGINT NOT NULL DEFAULT 0,
	faults BIGINT NOT NULL DEFAULT 0,
	cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
	worker TEXT, -- NULL: no lease
	lease_expires BIGINT,
	last_seq BIGINT NOT NULL DEFAULT 0, -- Seq of the task's last event
	UNIQUE (user_id, submission_id)
);
CREATE INDEX tasks_user ON tasks (user_id, request_time);
CREATE INDEX tasks_status ON tasks (status, request_time);
CREATE INDEX tasks_src ON tasks (src_endpoint, status);
CREATE INDEX tasks_dst ON tasks (dst_endpoint, status);

CREATE TABLE files (
	id {{autoid}},
	task_id TEXT NOT NULL REFERENCES tasks (id),
	src TEXT NOT NULL,
	dst TEXT NOT NULL,
	size BIGINT NOT NULL,
	state TEXT NOT NULL,
	algorithm TEXT NOT NULL,
	checksum TEXT NOT NULL,
	error TEXT NOT NULL,
	time BIGINT NOT NULL
);
CREATE INDEX files_state ON files (task_id, state, id);
CREATE INDEX files_src ON files (task_id, src);

CREATE TABLE canceled_files (
	task_id TEXT NOT NULL REFERENCES tasks (id),
	src TEXT NOT NULL,
	PRIMARY KEY (task_id, src)
);

CREATE TABLE events (
	task_id TEXT NOT NULL REFERENCES tasks (id),
	seq BIGINT NOT NULL,
	code TEXT NOT NULL,
	description TEXT NOT NULL,
	details TEXT NOT NULL,
	is_error BOOLEAN NOT NULL,
	time BIGINT NOT NULL,
	PRIMARY KEY (task_id, seq)
);
