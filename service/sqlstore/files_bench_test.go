package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"ferry/service/domain"
)

// BenchmarkFileRecords measures what the file records of one task cost
// on disk: it records files of a realistic tree (dirs directories of
// perDir files each, 500 records a Progress call, as the worker's
// flushes do) and reports the database's growth per file as bytes/file.
// Run it with `go test -run '^$' -bench FileRecords -benchtime 1x
// ./service/sqlstore/` (no size or timing is asserted anywhere).
func BenchmarkFileRecords(b *testing.B) {
	const dirs, perDir = 1000, 100
	for _, d := range databases {
		b.Run(d.name, func(b *testing.B) {
			for range b.N {
				ctx := context.Background()
				db := open(b, d.dsn(b))
				var u domain.User
				if err := db.CreateUser(ctx, &u); err != nil {
					b.Fatal(err)
				}
				task := domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: "src", DstEndpoint: "dst"}
				if err := db.CreateTask(ctx, &task); err != nil {
					b.Fatal(err)
				}
				if _, err := db.Claim(ctx, "w", time.Now(), time.Hour, 0); err != nil {
					b.Fatal(err)
				}
				before := dbSize(b, db)
				var batch domain.Batch
				for i := range dirs * perDir {
					dir := fmt.Sprintf("/dataset/run-%04d", i/perDir)
					name := fmt.Sprintf("/event-%06d.root", i)
					batch.Files = append(batch.Files, domain.File{Src: "/home/alice" + dir + name, Dst: "/archive/alice" + dir + name,
						Size: int64(1000 + i%7919*131), State: domain.FileSucceeded, Time: time.Now()})
					if len(batch.Files) == 500 {
						if err := db.Progress(ctx, task.ID, "w", batch); err != nil {
							b.Fatal(err)
						}
						batch.Files = batch.Files[:0]
					}
				}
				b.ReportMetric(float64(dbSize(b, db)-before)/(dirs*perDir), "bytes/file")
			}
		})
	}
}

// dbSize is the size of db's data: SQLite's pages, WAL checkpointed, or
// PostgreSQL's database, analysed and vacuumed so that the free space
// map and visibility map are there as they would be.
func dbSize(b *testing.B, db *DB) int64 {
	ctx := context.Background()
	var n int64
	var err error
	if db.d.dollar {
		if _, err = db.db.ExecContext(ctx, `VACUUM ANALYZE`); err == nil {
			err = db.db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
		}
	} else {
		if _, err = db.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err == nil {
			err = db.db.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&n)
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	return n
}
