-- Where a user's notifications go; '' for none.
ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';
