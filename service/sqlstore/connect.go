package sqlstore

import (
	"context"
	"time"

	"ferry/service/domain"
)

// CreateConnectEndpoint stores e and its first setup key in one
// transaction.
func (db *DB) CreateConnectEndpoint(ctx context.Context, e *domain.Endpoint, hash string, expires time.Time) (err error) {
	defer wrap(&err, "create connect endpoint")
	if e.Auth != domain.AuthConnect {
		return domain.Errorf(domain.EInvalid, "endpoint %s is not a connect endpoint", e.Name)
	}
	ne := *e
	err = db.inTx(ctx, func(c conn) error {
		if err := insertEndpoint(ctx, c, &ne); err != nil {
			return err
		}
		_, err := putSetupKey(ctx, c, ne.ID, hash, expires)
		return err
	})
	if err == nil {
		*e = ne
	}
	return err
}

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
		gen, err = putSetupKey(ctx, c, endpointID, hash, expires)
		return err
	})
	return gen, err
}

// putSetupKey gives endpointID a new setup key, starting a new generation,
// which it returns.
func putSetupKey(ctx context.Context, c conn, endpointID, hash string, expires time.Time) (gen int64, err error) {
	err = c.row(ctx, `INSERT INTO pairings (endpoint_id, key_hash, key_expires, generation) VALUES (?, ?, ?, 1)
		ON CONFLICT (endpoint_id) DO UPDATE SET key_hash = excluded.key_hash, key_expires = excluded.key_expires,
		generation = pairings.generation + 1 RETURNING generation`, endpointID, hash, us(expires)).Scan(&gen)
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
