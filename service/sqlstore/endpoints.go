package sqlstore

import (
	"context"

	"ferry/service/domain"
)

// CreateEndpoint stores e and sets its ID and (if zero) Created.
func (db *DB) CreateEndpoint(ctx context.Context, e *domain.Endpoint) (err error) {
	defer wrap(&err, "create endpoint")
	return insertEndpoint(ctx, db.conn(), e)
}

// insertEndpoint stores e through c and sets its ID and (if zero) Created.
func insertEndpoint(ctx context.Context, c conn, e *domain.Endpoint) error {
	ne := *e
	ne.ID, ne.Created = newID(), orNow(ne.Created)
	_, err := c.exec(ctx, `INSERT INTO endpoints
		(id, owner_id, name, description, servers, auth, default_dir, public, max_concurrent, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ne.ID, ne.OwnerID, ne.Name, ne.Description, jsonArg(ne.Servers), ne.Auth, ne.DefaultDir, ne.Public,
		ne.MaxConcurrent, us(ne.Created))
	if c.d.unique(err) {
		return domain.Errorf(domain.EConflict, "endpoint name %s is taken", ne.Name)
	}
	if err != nil {
		return err
	}
	*e = ne
	return nil
}

const endpointFrom = `SELECT e.id, e.owner_id, u.name, e.name, e.description, e.servers, e.auth, e.default_dir,
	e.public, e.max_concurrent, e.created FROM endpoints e JOIN users u ON u.id = e.owner_id`

func scanEndpoint(r scanner) (domain.Endpoint, error) {
	var e domain.Endpoint
	err := r.Scan(&e.ID, &e.OwnerID, &e.Owner, &e.Name, &e.Description, jsonCol{&e.Servers}, &e.Auth,
		&e.DefaultDir, &e.Public, &e.MaxConcurrent, timeCol{&e.Created})
	return e, err
}

func (db *DB) Endpoint(ctx context.Context, id string) (_ domain.Endpoint, err error) {
	defer wrap(&err, "endpoint")
	e, err := scanEndpoint(db.conn().row(ctx, endpointFrom+` WHERE e.id = ?`, id))
	return e, missing(err, "endpoint %s", id)
}

func (db *DB) EndpointByName(ctx context.Context, owner, name string) (_ domain.Endpoint, err error) {
	defer wrap(&err, "endpoint by name")
	e, err := scanEndpoint(db.conn().row(ctx, endpointFrom+` WHERE u.name = ? AND e.name = ?`, owner, name))
	return e, missing(err, "endpoint %s#%s", owner, name)
}

func (db *DB) Endpoints(ctx context.Context, userID int64, text string, mineOnly bool, page domain.Page) (_ []domain.Endpoint, _ int, err error) {
	defer wrap(&err, "endpoints")
	where, args := ` WHERE (e.owner_id = ? OR e.public)`, []any{userID}
	if mineOnly {
		where = ` WHERE e.owner_id = ?`
	}
	if text != "" {
		where += ` AND (LOWER(u.name || '#' || e.name) LIKE ? ESCAPE '\' OR LOWER(e.description) LIKE ? ESCAPE '\')`
		args = append(args, like(text), like(text))
	}
	c := db.conn()
	total, err := count(ctx, c, `SELECT COUNT(*) FROM endpoints e JOIN users u ON u.id = e.owner_id`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	page = page.Normal()
	eps, err := all(ctx, c, scanEndpoint, endpointFrom+where+` ORDER BY u.name{{collate}}, e.name{{collate}} LIMIT ? OFFSET ?`,
		append(args, page.Limit, page.Offset)...)
	return eps, total, err
}

func (db *DB) UpdateEndpoint(ctx context.Context, e domain.Endpoint) (err error) {
	defer wrap(&err, "update endpoint")
	return db.signaled(ctx, func(c conn) error {
		n, err := c.exec(ctx, `UPDATE endpoints SET name = ?, description = ?, servers = ?, auth = ?,
			default_dir = ?, public = ?, max_concurrent = ? WHERE id = ?`,
			e.Name, e.Description, jsonArg(e.Servers), e.Auth, e.DefaultDir, e.Public, e.MaxConcurrent, e.ID)
		if db.d.unique(err) {
			return domain.Errorf(domain.EConflict, "endpoint name %s is taken", e.Name)
		}
		if err = changed(n, err, "endpoint %s", e.ID); err != nil {
			return err
		}
		// Running tasks look again: at its servers, at who may use it.
		ids, err := all(ctx, c, scanString, `SELECT id FROM tasks WHERE status = 'ACTIVE' AND worker IS NOT NULL
			AND `+usesEndpoint, e.ID, e.ID, e.ID)
		if err != nil {
			return err
		}
		return signal(ctx, c, ids...)
	})
}

// DeleteEndpoint deletes an endpoint; its activations go with it (ON
// DELETE CASCADE).
func (db *DB) DeleteEndpoint(ctx context.Context, id string) (err error) {
	defer wrap(&err, "delete endpoint")
	n, err := db.conn().exec(ctx, `DELETE FROM endpoints WHERE id = ?`, id)
	return changed(n, err, "endpoint %s", id)
}

// PutActivation stores a, replacing the user's activation of the
// endpoint; a zero Created is set to now.
func (db *DB) PutActivation(ctx context.Context, a domain.Activation) (err error) {
	defer wrap(&err, "put activation")
	_, err = db.conn().exec(ctx, `INSERT INTO activations (user_id, endpoint_id, sealed, expires, created)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, endpoint_id)
		DO UPDATE SET sealed = excluded.sealed, expires = excluded.expires, created = excluded.created`,
		a.UserID, a.EndpointID, a.Sealed, us(a.Expires), us(orNow(a.Created)))
	return err
}

func (db *DB) Activation(ctx context.Context, userID int64, endpointID string) (_ domain.Activation, err error) {
	defer wrap(&err, "activation")
	a := domain.Activation{UserID: userID, EndpointID: endpointID}
	err = db.conn().row(ctx, `SELECT sealed, expires, created FROM activations WHERE user_id = ? AND endpoint_id = ?`,
		userID, endpointID).Scan(&a.Sealed, timeCol{&a.Expires}, timeCol{&a.Created})
	return a, missing(err, "activation of endpoint %s", endpointID)
}

func (db *DB) DeleteActivation(ctx context.Context, userID int64, endpointID string) (err error) {
	defer wrap(&err, "delete activation")
	n, err := db.conn().exec(ctx, `DELETE FROM activations WHERE user_id = ? AND endpoint_id = ?`, userID, endpointID)
	return changed(n, err, "activation of endpoint %s", endpointID)
}
