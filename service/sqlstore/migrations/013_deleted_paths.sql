-- Deleted paths: what a transfer deleted at a destination because its
-- source does not have it (delete_destination_extra), one row a path as
-- it went (a directory after what it held). dest is the destination's
-- index for a task with several, else 0.
CREATE TABLE deleted_paths (
	id {{autoid}},
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	dest INTEGER NOT NULL,
	path TEXT NOT NULL,
	dir BOOLEAN NOT NULL,
	size BIGINT NOT NULL,
	time BIGINT NOT NULL
);
CREATE INDEX deleted_paths_task ON deleted_paths (task_id, id);
