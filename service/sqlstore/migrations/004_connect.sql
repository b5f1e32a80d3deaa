-- ferry connect: how connect endpoints pair with their agents. key_hash is
-- the hex SHA-256 of the secret of the endpoint's one-time setup key (NULL
-- once used); generation counts the setup keys issued: agent certificates
-- of an earlier generation are revoked.
CREATE TABLE pairings (
	endpoint_id TEXT PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
	key_hash TEXT UNIQUE,
	key_expires BIGINT,
	generation BIGINT NOT NULL
);
