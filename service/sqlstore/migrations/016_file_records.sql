-- File records, compact (a task may record a hundred million): the
-- records of the files of one source directory (src_dir, the source
-- paths up to their last slash) that one Progress call recorded in one
-- state make one row, each record relative to the row (its name after
-- src_dir; its destination after dst_dir; its time after the row's), in
-- sqlstore's encoding (files.go). Directories are stored once a row, not
-- once a file, and a row costs one index entry for hundreds of files.
-- The rows of the old files table move here (moveFileRecords), and it
-- goes.
CREATE TABLE file_records (
	id {{autoid}},
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	state TEXT NOT NULL,
	src_dir {{blob}} NOT NULL,
	dst_dir {{blob}} NOT NULL,
	time BIGINT NOT NULL,
	recs {{blob}} NOT NULL
);
CREATE INDEX file_records_task ON file_records (task_id, id);
CREATE INDEX file_records_state ON file_records (task_id, state, id);
CREATE INDEX file_records_dir ON file_records (task_id, src_dir);
