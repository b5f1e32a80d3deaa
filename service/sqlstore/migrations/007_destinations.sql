-- Transfers to several destinations: each destination of a task (none for
-- a task with one, whose tasks.dst_endpoint says it all), with its paths
-- and counters, and each source file's last outcome at each destination,
-- so that a run after a crash sends a destination only what it lacks.
CREATE TABLE task_destinations (
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	idx INTEGER NOT NULL,
	endpoint TEXT NOT NULL,
	paths TEXT, -- JSON list of the items' paths there; NULL: the items' own
	files_transferred BIGINT NOT NULL DEFAULT 0,
	files_skipped BIGINT NOT NULL DEFAULT 0,
	files_failed BIGINT NOT NULL DEFAULT 0,
	bytes_transferred BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (task_id, idx)
);
CREATE INDEX task_destinations_endpoint ON task_destinations (endpoint);

CREATE TABLE dest_files (
	id {{autoid}},
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	dest INTEGER NOT NULL,
	src TEXT NOT NULL,
	dst TEXT NOT NULL,
	size BIGINT NOT NULL,
	state TEXT NOT NULL,
	error TEXT NOT NULL,
	time BIGINT NOT NULL,
	UNIQUE (task_id, dest, src)
);
CREATE INDEX dest_files_state ON dest_files (task_id, state, id);
