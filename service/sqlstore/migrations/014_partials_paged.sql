-- Partials get an id, the order in which GET task/{id}/partial_paths pages
-- them (a task may leave many), and what the API shows of each: the
-- source file's size and the bytes known to be at the destination.
CREATE TABLE partials_paged (
	id {{autoid}},
	task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	src TEXT NOT NULL,
	state TEXT NOT NULL,
	size BIGINT NOT NULL DEFAULT 0,
	have BIGINT NOT NULL DEFAULT 0,
	UNIQUE (task_id, src)
);
INSERT INTO partials_paged (task_id, src, state) SELECT task_id, src, state FROM partials ORDER BY task_id, src;
DROP TABLE partials;
ALTER TABLE partials_paged RENAME TO partials;
CREATE INDEX partials_task ON partials (task_id, id);
