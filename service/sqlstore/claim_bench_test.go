package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"ferry/service/domain"
)

// BenchmarkClaim measures one claim with a backlog of queued tasks, on
// each database: alice runs perUser tasks, at her limit, and has the
// backlog queued behind them; bob's one task, queued after all of hers,
// is the one to claim. Each iteration claims it and puts it back. Run it
// with `go test -run '^$' -bench Claim ./service/sqlstore/` (no timing
// is asserted anywhere).
func BenchmarkClaim(b *testing.B) {
	const perUser = 3
	for _, d := range databases {
		for _, backlog := range []int{10, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/queued=%d", d.name, backlog), func(b *testing.B) {
				ctx := context.Background()
				db := open(b, d.dsn(b))
				now := time.Now()
				var alice, bob domain.User
				for _, u := range []*domain.User{&alice, &bob} {
					*u = domain.User{Name: fmt.Sprintf("u%p", u)}
					if err := db.CreateUser(ctx, u); err != nil {
						b.Fatal(err)
					}
				}
				// The backlog in one statement: n rows numbered 1..n.
				if _, err := db.conn().exec(ctx, `INSERT INTO tasks (id, user_id, type, label, status, nice_status,
					src_endpoint, dst_endpoint, options, request_time)
					WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
					SELECT 'queued-' || i, ?, 'TRANSFER', '', 'ACTIVE', 'QUEUED', 'ep', 'ep', '{}', CAST(? AS BIGINT) + i FROM s`,
					backlog+perUser, alice.ID, us(now)); err != nil {
					b.Fatal(err)
				}
				for range perUser {
					if _, err := db.Claim(ctx, "busy", now, time.Hour, 0); err != nil {
						b.Fatal(err)
					}
				}
				last := domain.Task{UserID: bob.ID, Type: domain.TypeTransfer, SrcEndpoint: "ep", DstEndpoint: "ep",
					RequestTime: now.Add(time.Hour)}
				if err := db.CreateTask(ctx, &last); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					t, err := db.Claim(ctx, "w", now, time.Hour, perUser)
					if err != nil {
						b.Fatal(err)
					}
					if t.ID != last.ID {
						b.Fatalf("claimed %s, want bob's %s", t.ID, last.ID)
					}
					if _, err := db.conn().exec(ctx, `UPDATE tasks SET worker = NULL, lease_expires = NULL WHERE id = ?`, t.ID); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
