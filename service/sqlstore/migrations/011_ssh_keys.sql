-- Users' public keys for the SSH command gateway: authorized_keys lines
-- and their SHA-256 fingerprints, one of each per user.
CREATE TABLE ssh_keys (
	id {{autoid}},
	user_id BIGINT NOT NULL REFERENCES users (id),
	line TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	created BIGINT NOT NULL,
	UNIQUE (user_id, fingerprint)
);
