-- A gsi endpoint's MyProxy server (host:port, canonical), from which the
-- service fetches users' proxies to activate it, and the server's
-- identity if not a name of its host; '': none. Endpoints naming one
-- server share a MyProxy activation: the index finds them.
ALTER TABLE endpoints ADD COLUMN myproxy_server TEXT NOT NULL DEFAULT '';
ALTER TABLE endpoints ADD COLUMN myproxy_server_dn TEXT NOT NULL DEFAULT '';
CREATE INDEX endpoints_myproxy ON endpoints (myproxy_server);
