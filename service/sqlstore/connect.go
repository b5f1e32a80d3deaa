package sqlstore

import (
	"context"
	"time"

	"ferry/service/domain"
)

func (db *DB) NewSetupKey(ctx context.Context, endpointID, hash string, expires time.Time) (gen int64, err error) {
	defer wrap(&err, "new setup key")
	err = db.inTx(ctx, func(c conn) error {
		var auth string
		if err := c.row(ctx, `SELECT auth FROM endpoints WHERE id = ?`, endpointID).Scan(&auth); err != nil {
			return missing(err, "endpoint %s", endpointID)
		}
		if auth != domain.AuthConnect {
			return domain.Errorf(domain.EInvalid, "endpoint %s is not a connect endpoint", endpointID)
		}
		return c.row(ctx, `INSERT INTO pairings (endpoint_id, key_hash, key_expires, generation) VALUES (?, ?, ?, 1)
			ON CONFLICT (endpoint_id) DO UPDATE SET key_hash = excluded.key_hash, key_expires = excluded.key_expires,
			generation = pairings.generation + 1 RETURNING generation`, endpointID, hash, us(expires)).Scan(&gen)
	})
	return gen, err
}

func (db *DB) UseSetupKey(ctx context.Context, hash string, now time.Time) (id string, gen int64, err error) {
	defer wrap(&err, "use setup key")
	err = db.conn().row(ctx, `UPDATE pairings SET key_hash = NULL, key_expires = NULL
		WHERE key_hash = ? AND key_expires > ? RETURNING endpoint_id, generation`, hash, us(now)).Scan(&id, &gen)
	return id, gen, missing(err, "setup key (used, replaced or expired)")
}

func (db *DB) CertGeneration(ctx context.Context, endpointID string) (gen int64, err error) {
	defer wrap(&err, "certificate generation")
	err = db.conn().row(ctx, `SELECT generation FROM pairings WHERE endpoint_id = ?`, endpointID).Scan(&gen)
	return gen, missing(err, "pairing of endpoint %s", endpointID)
}
