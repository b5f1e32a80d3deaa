-- An endpoint reached only through another (a head node in front of a
-- cluster's private network): the relay's ID; NULL: reached directly.
ALTER TABLE endpoints ADD COLUMN via TEXT REFERENCES endpoints (id);
CREATE INDEX endpoints_via ON endpoints (via);
