-- Bookmarks: a user's names for paths on endpoints (globus-cli's
-- bookmarks), each name once per user. A bookmark goes with its
-- endpoint.
CREATE TABLE bookmarks (
	id TEXT PRIMARY KEY,
	user_id BIGINT NOT NULL REFERENCES users (id),
	name TEXT NOT NULL,
	endpoint_id TEXT NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
	path TEXT NOT NULL,
	created BIGINT NOT NULL,
	UNIQUE (user_id, name)
);
