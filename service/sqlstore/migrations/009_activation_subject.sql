-- Who an activation logs in as, when the credential names it: a grid
-- proxy's identity (its end-entity DN). Not secret; the credential itself
-- stays in sealed.
ALTER TABLE activations ADD COLUMN subject TEXT NOT NULL DEFAULT '';
