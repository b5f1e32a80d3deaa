package sqlstore

import (
	"context"
	"time"

	"ferry/service/domain"
)

func (db *DB) InitCA(ctx context.Context, sealed []byte) (stored []byte, err error) {
	defer wrap(&err, "init CA")
	c := db.conn()
	if _, err := c.exec(ctx, `INSERT INTO service_ca (id, sealed) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, sealed); err != nil {
		return nil, err
	}
	err = c.row(ctx, `SELECT sealed FROM service_ca WHERE id = 1`).Scan(&stored)
	return stored, err
}

// forgetAfter is how long the record of a process that stopped renewing
// it is kept.
const forgetAfter = 24 * time.Hour

func (db *DB) PutProcess(ctx context.Context, p domain.Process) (err error) {
	defer wrap(&err, "put process")
	return db.inTx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `INSERT INTO processes (id, relay_url, expires) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET relay_url = excluded.relay_url, expires = excluded.expires`,
			p.ID, p.RelayURL, us(p.Expires)); err != nil {
			return err
		}
		_, err := c.exec(ctx, `DELETE FROM processes WHERE expires <= ?`, us(p.Expires.Add(-forgetAfter)))
		return err
	})
}

func (db *DB) DeleteProcess(ctx context.Context, id string) (err error) {
	defer wrap(&err, "delete process")
	n, err := db.conn().exec(ctx, `DELETE FROM processes WHERE id = ?`, id)
	return changed(n, err, "process %s", id)
}

func scanProcess(r scanner) (domain.Process, error) {
	var p domain.Process
	err := r.Scan(&p.ID, &p.RelayURL, timeCol{&p.Expires})
	return p, err
}

func (db *DB) Processes(ctx context.Context, now time.Time) (_ []domain.Process, err error) {
	defer wrap(&err, "processes")
	return all(ctx, db.conn(), scanProcess, `SELECT id, relay_url, expires FROM processes WHERE expires > ? ORDER BY id{{collate}}`, us(now))
}

func (db *DB) PutAgentRoute(ctx context.Context, endpointID, processID string) (err error) {
	defer wrap(&err, "put agent route")
	n, err := db.conn().exec(ctx, `INSERT INTO agent_routes (endpoint_id, process_id)
		SELECT id, ? FROM endpoints WHERE id = ?
		ON CONFLICT (endpoint_id) DO UPDATE SET process_id = excluded.process_id`, processID, endpointID)
	return changed(n, err, "endpoint %s", endpointID)
}

func (db *DB) DeleteAgentRoute(ctx context.Context, endpointID, processID string) (err error) {
	defer wrap(&err, "delete agent route")
	_, err = db.conn().exec(ctx, `DELETE FROM agent_routes WHERE endpoint_id = ? AND process_id = ?`, endpointID, processID)
	return err
}

func (db *DB) AgentRoutes(ctx context.Context, endpointIDs []string, now time.Time) (_ map[string]domain.Process, err error) {
	defer wrap(&err, "agent routes")
	out := map[string]domain.Process{}
	if len(endpointIDs) == 0 {
		return out, nil
	}
	cond, args := in("r.endpoint_id", endpointIDs)
	type route struct {
		endpoint string
		p        domain.Process
	}
	routes, err := all(ctx, db.conn(), func(r scanner) (route, error) {
		var rt route
		err := r.Scan(&rt.endpoint, &rt.p.ID, &rt.p.RelayURL, timeCol{&rt.p.Expires})
		return rt, err
	}, `SELECT r.endpoint_id, p.id, p.relay_url, p.expires FROM agent_routes r JOIN processes p ON p.id = r.process_id
		WHERE p.expires > ? AND `+cond, append([]any{us(now)}, args...)...)
	for _, rt := range routes {
		out[rt.endpoint] = rt.p
	}
	return out, err
}
