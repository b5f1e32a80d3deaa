-- Signals: tasks whose running work must look at them again at once (a
-- cancel, a canceled file, a new deadline, an endpoint changed), for the
-- workers of every process. Watchers read rows past the last seq they saw;
-- rows older than a few minutes are deleted.
CREATE TABLE signals (
	seq {{autoid}},
	task_id TEXT NOT NULL,
	at BIGINT NOT NULL
);
