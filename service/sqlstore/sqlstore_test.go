package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/internal/pgtest"
	"ferry/service/domain"
	"ferry/service/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// databases are the kinds of database the tests run on, each with a
// maker of fresh, empty ones.
var databases = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"SQLite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "ferry.db") }},
	{"PostgreSQL", func(t testing.TB) string { return pgtest.DSN(t) }},
}

func open(t testing.TB, dsn string) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) domain.Store { return open(t, d.dsn(t)) })
		})
	}
}

// TestShared opens one database from several handles at once, as service
// processes starting together do (the migration runs once), and races
// claims on two of them.
func TestShared(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			dsn := d.dsn(t)
			dbs := make([]*DB, 4)
			errs := make([]error, len(dbs))
			done := make(chan int)
			for i := range dbs {
				go func() {
					dbs[i], errs[i] = Open(context.Background(), dsn)
					done <- i
				}()
			}
			for range dbs {
				if i := <-done; errs[i] == nil {
					t.Cleanup(func() { dbs[i].Close() })
				}
			}
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var versions int
			want, _ := fs.Glob(migrations, "migrations/*.sql")
			if err := dbs[0].db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&versions); err != nil || versions != len(want) {
				t.Fatalf("schema_version has %d rows (%v), want %d", versions, err, len(want))
			}
			storetest.RunShared(t, dbs[0], dbs[1])
		})
	}
}

// TestNewerSchema checks that a database migrated by a newer program is
// refused rather than used.
func TestNewerSchema(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			dsn := d.dsn(t)
			db := open(t, dsn)
			if _, err := db.conn().exec(context.Background(), `INSERT INTO schema_version (version, applied) VALUES (999, 0)`); err != nil {
				t.Fatal(err)
			}
			db2, err := Open(context.Background(), dsn)
			if err == nil {
				db2.Close()
				t.Fatal("opened a database of schema version 999")
			}
			if !strings.Contains(err.Error(), "newer") {
				t.Fatalf("error %q, want one saying the schema is newer", err)
			}
		})
	}
}

// TestSQLitePath checks that any file name works and that missing
// directories are created.
func TestSQLitePath(t *testing.T) {
	for _, name := range []string{"plain.db", "new/dir/ferry.db", "odd ?#%&=name.db", "file:not-a-uri.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, name)
			db := open(t, p)
			if err := db.CreateUser(context.Background(), &domain.User{Name: "u"}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("database file: %v", err)
			}
			var mode string
			if err := db.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Fatalf("journal mode %q (%v), want wal", mode, err)
			}
		})
	}
}

// TestSQLiteFileModes: the database holds password hashes, emails and
// sealed credentials: its file, WAL and shared-memory index are the
// owner's alone (0600), and so is its directory (0700), whether Open
// makes them, or finds them readable by others (an older version's, or
// made under a lax umask) and tightens them.
func TestSQLiteFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	check := func(t *testing.T, dir, p string) {
		t.Helper()
		db := open(t, p)
		if err := db.CreateUser(context.Background(), &domain.User{Name: "u" + strconv.Itoa(rand.Int())}); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, p: 0o600, p + "-wal": 0o600, p + "-shm": 0o600} {
			st, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode() != want {
				t.Errorf("%s: mode %v, want %v", filepath.Base(name), st.Mode(), want)
			}
		}
	}
	t.Run("new", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		check(t, dir, filepath.Join(dir, "ferry.db"))
	})
	t.Run("readable by others", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		p := filepath.Join(dir, "ferry.db")
		check(t, dir, p)
		for _, name := range []string{p, p + "-wal", p + "-shm"} {
			os.Chmod(name, 0o644)
		}
		os.Chmod(dir, 0o755)
		check(t, dir, p)
	})
}

func TestDialectSQL(t *testing.T) {
	for _, c := range []struct {
		d       *dialect
		in, out string
	}{
		{&sqliteDialect, `SELECT ? FROM t WHERE a = '?'{{skiplocked}}`, `SELECT ? FROM t WHERE a = '?'`},
		{&postgresDialect, `SELECT ? FROM t WHERE a = '?' AND b = ?{{skiplocked}}`, `SELECT $1 FROM t WHERE a = '?' AND b = $2 FOR UPDATE SKIP LOCKED`},
		{&postgresDialect, `ORDER BY u.name{{collate}} LIMIT ? OFFSET ?`, `ORDER BY u.name COLLATE "C" LIMIT $1 OFFSET $2`},
		{&postgresDialect, `x LIKE ? ESCAPE '\' OR y LIKE ? ESCAPE '\'`, `x LIKE $1 ESCAPE '\' OR y LIKE $2 ESCAPE '\'`},
	} {
		if got := c.d.sql(c.in); got != c.out {
			t.Errorf("%s: sql(%q) = %q, want %q", c.d.driver, c.in, got, c.out)
		}
	}
}

// TestMoveFileRecords fills the files table of schema 15, one row a
// file, with the records of two tasks interleaved, and checks that
// migration 016's step moves them: each task's in order, whole.
func TestMoveFileRecords(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t, d.dsn(t))
			var u domain.User
			if err := db.CreateUser(ctx, &u); err != nil {
				t.Fatal(err)
			}
			tasks := make([]domain.Task, 2)
			for i := range tasks {
				tasks[i] = domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: "ep", DstEndpoint: "ep"}
				if err := db.CreateTask(ctx, &tasks[i]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.conn().exec(ctx, `CREATE TABLE files (id {{autoid}}, task_id TEXT NOT NULL, src TEXT NOT NULL,
				dst TEXT NOT NULL, size BIGINT NOT NULL, state TEXT NOT NULL, algorithm TEXT NOT NULL, checksum TEXT NOT NULL,
				error TEXT NOT NULL, time BIGINT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			want := make([][]domain.File, len(tasks))
			t0 := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
			for i := range 2500 {
				task := tasks[i%3%2]
				f := domain.File{TaskID: task.ID, Src: fmt.Sprintf("/d%d/f%d", i/700, i), Dst: fmt.Sprintf("/o/d%d/g%d", i/700, i),
					Size: int64(i), State: []string{domain.FileSucceeded, domain.FileFailed}[i/1000%2], Algorithm: "MD5",
					Checksum: fmt.Sprint(i), Error: fmt.Sprint("e", i), Time: t0.Add(time.Duration(i) * time.Second)}
				want[i%3%2] = append(want[i%3%2], f)
				if _, err := db.conn().exec(ctx, `INSERT INTO files (task_id, src, dst, size, state, algorithm, checksum, error, time)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, f.TaskID, f.Src, f.Dst, f.Size, f.State, f.Algorithm, f.Checksum, f.Error, us(f.Time)); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.inTx(ctx, func(c conn) error { return moveFileRecords(ctx, c) }); err != nil {
				t.Fatal(err)
			}
			for i, task := range tasks {
				var got []domain.File
				for marker := int64(0); ; {
					page, next, err := db.Files(ctx, task.ID, "", marker, 1000)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, page...)
					if marker = next; marker == 0 {
						break
					}
				}
				if !reflect.DeepEqual(got, want[i]) {
					t.Fatalf("task %d: %d files moved, want %d; first %+v, want %+v", i, len(got), len(want[i]), got[:min(1, len(got))], want[i][:1])
				}
			}
			if _, err := db.conn().exec(ctx, `SELECT 1 FROM files`); err == nil {
				t.Fatal("the files table is still there")
			}
		})
	}
}
