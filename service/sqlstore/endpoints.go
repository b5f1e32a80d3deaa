package sqlstore

import (
	"context"
	"strings"

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
	if err := relayExists(ctx, c, ne.Via); err != nil {
		return err
	}
	_, err := c.exec(ctx, `INSERT INTO endpoints
		(id, owner_id, name, description, servers, auth, default_dir, public, max_concurrent, via,
		myproxy_server, myproxy_server_dn, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ne.ID, ne.OwnerID, ne.Name, ne.Description, jsonArg(ne.Servers), ne.Auth, ne.DefaultDir, ne.Public,
		ne.MaxConcurrent, nullString(ne.Via), ne.MyProxyServer, ne.MyProxyServerDN, us(ne.Created))
	if c.d.unique(err) {
		return domain.Errorf(domain.EConflict, "endpoint name %s is taken", ne.Name)
	}
	if err != nil {
		return err
	}
	*e = ne
	return nil
}

// relayExists refuses a Via that names no endpoint ("": none named).
func relayExists(ctx context.Context, c conn, via string) error {
	if via == "" {
		return nil
	}
	var n int
	if err := c.row(ctx, `SELECT COUNT(*) FROM endpoints WHERE id = ?`, via).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return domain.Errorf(domain.ENotFound, "via: no endpoint %s", via)
	}
	return nil
}

// nullString is s, or NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const endpointFrom = `SELECT e.id, e.owner_id, u.name, e.name, e.description, e.servers, e.auth, e.default_dir,
	e.public, e.max_concurrent, COALESCE(e.via, ''), COALESCE(vu.name || '#' || v.name, ''),
	e.myproxy_server, e.myproxy_server_dn, e.created
	FROM endpoints e JOIN users u ON u.id = e.owner_id
	LEFT JOIN endpoints v ON v.id = e.via LEFT JOIN users vu ON vu.id = v.owner_id`

func scanEndpoint(r scanner) (domain.Endpoint, error) {
	var e domain.Endpoint
	err := r.Scan(&e.ID, &e.OwnerID, &e.Owner, &e.Name, &e.Description, jsonCol{&e.Servers}, &e.Auth,
		&e.DefaultDir, &e.Public, &e.MaxConcurrent, &e.Via, &e.ViaName,
		&e.MyProxyServer, &e.MyProxyServerDN, timeCol{&e.Created})
	return e, err
}

// EndpointsVia lists the endpoints whose relay is id.
func (db *DB) EndpointsVia(ctx context.Context, id string) (_ []domain.Endpoint, err error) {
	defer wrap(&err, "endpoints via")
	return all(ctx, db.conn(), scanEndpoint, endpointFrom+` WHERE e.via = ? ORDER BY u.name{{collate}}, e.name{{collate}}`, id)
}

// EndpointsByMyProxy lists the gsi endpoints userID may use that name
// MyProxy server server.
func (db *DB) EndpointsByMyProxy(ctx context.Context, userID int64, server string) (_ []domain.Endpoint, err error) {
	defer wrap(&err, "endpoints by MyProxy server")
	if server == "" {
		return nil, nil
	}
	return all(ctx, db.conn(), scanEndpoint, endpointFrom+` WHERE e.myproxy_server = ? AND e.auth = ? AND (e.owner_id = ? OR e.public)
		ORDER BY u.name{{collate}}, e.name{{collate}}`, server, domain.AuthGSI, userID)
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
		if err := relayExists(ctx, c, e.Via); err != nil {
			return err
		}
		n, err := c.exec(ctx, `UPDATE endpoints SET name = ?, description = ?, servers = ?, auth = ?,
			default_dir = ?, public = ?, max_concurrent = ?, via = ?, myproxy_server = ?, myproxy_server_dn = ? WHERE id = ?`,
			e.Name, e.Description, jsonArg(e.Servers), e.Auth, e.DefaultDir, e.Public, e.MaxConcurrent, nullString(e.Via),
			e.MyProxyServer, e.MyProxyServerDN, e.ID)
		if db.d.unique(err) {
			return domain.Errorf(domain.EConflict, "endpoint name %s is taken", e.Name)
		}
		if err = changed(n, err, "endpoint %s", e.ID); err != nil {
			return err
		}
		// Running tasks look again: at its servers, at who may use it.
		ids, err := all(ctx, c, scanString, `SELECT id FROM tasks WHERE status = 'ACTIVE' AND worker IS NOT NULL
			AND `+usesEndpoint, usesArgs(e.ID)...)
		if err != nil {
			return err
		}
		return signal(ctx, c, ids...)
	})
}

// DeleteEndpoint deletes an endpoint; its activations go with it (ON
// DELETE CASCADE). An endpoint that is another's relay is kept.
func (db *DB) DeleteEndpoint(ctx context.Context, id string) (err error) {
	defer wrap(&err, "delete endpoint")
	return db.inTx(ctx, func(c conn) error {
		behind, err := all(ctx, c, scanString, `SELECT u.name || '#' || e.name FROM endpoints e JOIN users u ON u.id = e.owner_id
			WHERE e.via = ? ORDER BY 1`, id)
		if err != nil {
			return err
		}
		if len(behind) > 0 {
			return domain.Errorf(domain.EConflict, "the endpoint is the head node of %s: change their via first", strings.Join(behind, ", "))
		}
		n, err := c.exec(ctx, `DELETE FROM endpoints WHERE id = ?`, id)
		return changed(n, err, "endpoint %s", id)
	})
}

// PutActivation stores a, replacing the user's activation of the
// endpoint; a zero Created is set to now.
func (db *DB) PutActivation(ctx context.Context, a domain.Activation) (err error) {
	defer wrap(&err, "put activation")
	_, err = db.conn().exec(ctx, `INSERT INTO activations (user_id, endpoint_id, sealed, expires, created, subject)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, endpoint_id)
		DO UPDATE SET sealed = excluded.sealed, expires = excluded.expires, created = excluded.created, subject = excluded.subject`,
		a.UserID, a.EndpointID, a.Sealed, us(a.Expires), us(orNow(a.Created)), a.Subject)
	return err
}

func (db *DB) Activation(ctx context.Context, userID int64, endpointID string) (_ domain.Activation, err error) {
	defer wrap(&err, "activation")
	a := domain.Activation{UserID: userID, EndpointID: endpointID}
	err = db.conn().row(ctx, `SELECT sealed, expires, created, subject FROM activations WHERE user_id = ? AND endpoint_id = ?`,
		userID, endpointID).Scan(&a.Sealed, timeCol{&a.Expires}, timeCol{&a.Created}, &a.Subject)
	return a, missing(err, "activation of endpoint %s", endpointID)
}

func (db *DB) DeleteActivation(ctx context.Context, userID int64, endpointID string) (err error) {
	defer wrap(&err, "delete activation")
	n, err := db.conn().exec(ctx, `DELETE FROM activations WHERE user_id = ? AND endpoint_id = ?`, userID, endpointID)
	return changed(n, err, "activation of endpoint %s", endpointID)
}
