-- Signals: tasks whose running work must look at them again at once (a
-- cancel, a canceled file, a new deadline, an endpoint changed), for the
-- workers of every process. Watchers read rows past the last seq they saw;
-- rows older than a few minutes are deleted.
CREATE TABLE signals (
	seq {{autoid}},
	task_id TEXT NOT NULL,
	at BIGINT NOT NULL
);

-- Partials: what a worker knows of a file it has not finished (the ranges
-- at the destination, in the worker's own encoding), so that a run after
-- a crash sends only the rest. Deleted as the file's record is written.
CREATE TABLE partials (
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	src TEXT NOT NULL,
	state TEXT NOT NULL,
	PRIMARY KEY (task_id, src)
);
