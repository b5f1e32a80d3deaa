-- Several ferry server processes on one database. service_ca holds the
-- connect CA they share (sealed with the key of --key-file), one row;
-- processes the processes running, where their relays are reached and
-- until when their records hold unless renewed; agent_routes the process
-- each connected agent is connected to.
CREATE TABLE service_ca (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	sealed {{blob}} NOT NULL
);

CREATE TABLE processes (
	id TEXT PRIMARY KEY,
	relay_url TEXT NOT NULL,
	expires BIGINT NOT NULL
);

CREATE TABLE agent_routes (
	endpoint_id TEXT PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
	process_id TEXT NOT NULL
);
