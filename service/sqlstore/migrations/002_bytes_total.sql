-- What a task is expected to move, for its progress and ETA.
ALTER TABLE tasks ADD COLUMN bytes_total BIGINT NOT NULL DEFAULT 0;
