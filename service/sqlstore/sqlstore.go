// Package sqlstore implements domain.Store over database/sql, for SQLite
// (the embedded default, through the pure-Go modernc.org/sqlite) and for
// PostgreSQL (through pgx), with one set of queries. A small dialect fills
// in the few differences: placeholders, column types, row locking and the
// lock that serializes claims and migrations across processes.
//
// The schema is embedded and migrated at Open, under that lock, so several
// service processes may open one PostgreSQL database at once. Times are
// stored as Unix microseconds in UTC and come back in UTC.
package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"ferry/service/domain"
)

// DB is a Store on one SQLite file or PostgreSQL database.
type DB struct {
	db     *sql.DB
	d      *dialect
	hub    hub           // signals (signals.go)
	closed chan struct{} // closed by Close
}

var _ domain.Store = (*DB)(nil)

// Open opens the database named by dsn and migrates its schema: a
// postgres:// or postgresql:// URL for PostgreSQL, anything else the path
// of a SQLite file (created, with its directory, if missing; WAL mode,
// foreign keys on, and a busy timeout so writers queue).
func Open(ctx context.Context, dsn string) (*DB, error) {
	d, src := &sqliteDialect, ""
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		d, src = &postgresDialect, dsn
	} else {
		dsn = filepath.Clean(dsn)
		if err := private(dsn); err != nil {
			return nil, fmt.Errorf("sqlstore: %w", err)
		}
		// A file: URI, so that no character of the path is taken for
		// the start of the parameters. Every write transaction begins
		// IMMEDIATE: it holds the write lock from its first statement.
		src = "file:" + (&url.URL{Path: dsn}).EscapedPath() +
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	}
	sdb, err := sql.Open(d.driver, src)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	// Keep connections for the many workers and API requests of one
	// process instead of reopening them (PostgreSQL sessions are costly).
	sdb.SetMaxIdleConns(maxIdle)
	db := &DB{db: sdb, d: d, closed: make(chan struct{})}
	// Processes opening a new SQLite file at once race to switch it to
	// WAL, which SQLite answers with SQLITE_BUSY at once, without waiting
	// for busy_timeout: try again, a few times.
	err = db.migrate(ctx)
	for try := 0; try < 50 && busy(err) && ctx.Err() == nil; try++ {
		time.Sleep(time.Duration(10+mrand.IntN(40)) * time.Millisecond)
		err = db.migrate(ctx)
	}
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("sqlstore: migrate: %w", err)
	}
	return db, nil
}

// private makes the SQLite database p, which holds password hashes,
// emails and sealed credentials, its owner's alone: the file (created
// empty if missing, with its directory) and its WAL and shared-memory
// files (SQLite gives them the database's mode) lose any group and other
// permission, and so does the directory, where it can.
func private(p string) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o077 != 0 {
		os.Chmod(dir, st.Mode().Perm()&^0o077) // not ours, maybe: the files are private anyway
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, name := range []string{p, p + "-wal", p + "-shm"} {
		st, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && st.Mode().Perm()&0o077 != 0 {
			err = os.Chmod(name, st.Mode().Perm()&^0o077)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// busy reports SQLite's "database is locked".
func busy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// maxIdle is how many idle connections a DB keeps.
const maxIdle = 64

// Close closes the database.
func (db *DB) Close() error {
	select {
	case <-db.closed:
	default:
		close(db.closed)
	}
	return db.db.Close()
}

// dialect is what differs between the databases.
type dialect struct {
	driver string
	// tokens replaces {{name}} in the schema and the queries.
	tokens *strings.Replacer
	// dollar: placeholders are $1, $2, ... rather than ?.
	dollar bool
	// lock takes a lock, held until the transaction ends, on one of the
	// keys below; "" when every write transaction already excludes the
	// others.
	lock string
	// noJIT, if set, turns off for the rest of the transaction the
	// compiling of queries that the planner deems costly: Claim's query,
	// whose cost PostgreSQL overestimates wildly on a table without
	// statistics (a new or suddenly grown queue), runs in 0.2 ms and took
	// 1.2 s to compile.
	noJIT string
	// unique reports a unique-constraint violation.
	unique func(error) bool
	// notify: the database delivers notifications (LISTEN/NOTIFY).
	notify bool
}

// Keys of dialect.lock.
const (
	lockMigrate = 0x66657272790001 // "ferry" 1
	lockClaim   = 0x66657272790002
)

var sqliteDialect = dialect{
	driver: "sqlite",
	tokens: strings.NewReplacer(
		"{{autoid}}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{{blob}}", "BLOB",
		"{{skiplocked}}", "",
		"{{collate}}", "",
		// Claim reads the queue through its index: the planner, with no
		// statistics, would read every ACTIVE task, or every task of a
		// user, instead.
		"{{queue}}", " INDEXED BY tasks_queue",
	),
	unique: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
	},
}

var postgresDialect = dialect{
	driver: "pgx",
	tokens: strings.NewReplacer(
		"{{autoid}}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		"{{blob}}", "BYTEA",
		// Claim passes over rows other transactions are updating.
		"{{skiplocked}}", " FOR UPDATE SKIP LOCKED",
		// Names sort by bytes, as in SQLite, whatever the database's locale.
		"{{collate}}", ` COLLATE "C"`,
		"{{queue}}", "",
	),
	dollar: true,
	notify: true,
	lock:   "SELECT pg_advisory_xact_lock(?)",
	noJIT:  "SET LOCAL jit = off",
	unique: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
}

// sql rewrites a query written with ? placeholders and {{tokens}} into
// the dialect's form.
func (d *dialect) sql(q string) string {
	q = d.tokens.Replace(q)
	if !d.dollar {
		return q
	}
	var b strings.Builder
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		switch {
		case q[i] == '\'':
			quoted = !quoted
		case q[i] == '?' && !quoted:
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// runner is a *sql.DB or a *sql.Tx.
type runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs queries in the dialect's form.
type conn struct {
	r runner
	d *dialect
}

func (c conn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.r.ExecContext(ctx, c.d.sql(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.r.QueryContext(ctx, c.d.sql(q), args...)
}

func (c conn) row(ctx context.Context, q string, args ...any) *sql.Row {
	return c.r.QueryRowContext(ctx, c.d.sql(q), args...)
}

// lock serializes transactions on key across processes (see dialect.lock).
func (c conn) lock(ctx context.Context, key int64) error {
	if c.d.lock == "" {
		return nil
	}
	_, err := c.exec(ctx, c.d.lock, key)
	return err
}

// conn runs queries outside a transaction.
func (db *DB) conn() conn { return conn{db.db, db.d} }

// inTx runs fn in a transaction, committed if fn returns nil.
func (db *DB) inTx(ctx context.Context, fn func(c conn) error) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(conn{tx, db.d}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

//go:embed migrations/*.sql
var migrations embed.FS

// steps are what a migration does beyond its SQL, after it, by version:
// what SQL alone cannot write.
var steps = map[int]func(context.Context, conn) error{
	16: moveFileRecords,
}

// migrate applies the embedded migrations the database lacks, in one
// transaction under the migration lock, each with its step if it has
// one. Each file is named NNN_what.sql and its number is recorded in
// schema_version.
func (db *DB) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	return db.inTx(ctx, func(c conn) error {
		if err := c.lock(ctx, lockMigrate); err != nil {
			return err
		}
		if _, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied BIGINT NOT NULL)`); err != nil {
			return err
		}
		var have int
		if err := c.row(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		latest := 0
		for _, name := range names {
			base := filepath.Base(name)
			v, err := strconv.Atoi(base[:strings.IndexByte(base+"_", '_')])
			if err != nil {
				return fmt.Errorf("migration %s: no version number", base)
			}
			latest = v
			if v <= have {
				continue
			}
			b, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := c.r.ExecContext(ctx, c.d.tokens.Replace(string(b))); err != nil {
				return fmt.Errorf("%s: %w", base, err)
			}
			if step := steps[v]; step != nil {
				if err := step(ctx, c); err != nil {
					return fmt.Errorf("%s: %w", base, err)
				}
			}
			if _, err := c.exec(ctx, `INSERT INTO schema_version (version, applied) VALUES (?, ?)`, v, us(time.Now())); err != nil {
				return err
			}
		}
		if have > latest {
			return fmt.Errorf("the database has schema version %d, newer than this program's %d", have, latest)
		}
		return nil
	})
}

// us is a time column's value: Unix microseconds, or NULL for the zero
// time.
func us(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// stored is t as the store gives it back: UTC, to the microsecond.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// orNow is stored(t), or the current time if t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return stored(t)
}

// timeCol scans a column written by us.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.t = time.Time{}
	case int64:
		*c.t = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("time column holds %T", v)
	}
	return nil
}

// jsonArg is v as a JSON column's value; a nil pointer is NULL.
func jsonArg(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the domain's JSON types always marshal
	}
	if string(b) == "null" {
		return nil
	}
	return string(b)
}

// jsonCol scans a JSON column into v; NULL leaves v alone.
type jsonCol struct{ v any }

func (c jsonCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return json.Unmarshal([]byte(v), c.v)
	case []byte:
		return json.Unmarshal(v, c.v)
	}
	return fmt.Errorf("JSON column holds %T", v)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// all scans every row of a query.
func all[T any](ctx context.Context, c conn, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := c.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// count is the result of a SELECT COUNT(*).
func count(ctx context.Context, c conn, q string, args ...any) (int, error) {
	var n int
	err := c.row(ctx, q, args...).Scan(&n)
	return n, err
}

// missing turns sql.ErrNoRows into an ENotFound error saying what.
func missing(err error, what string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Errorf(domain.ENotFound, what+" not found", args...)
	}
	return err
}

// changed is the error of a statement that must change one row: ENotFound
// saying what when it changed none.
func changed(n int64, err error, what string, args ...any) error {
	if err == nil && n == 0 {
		return domain.Errorf(domain.ENotFound, what+" not found", args...)
	}
	return err
}

// wrap gives an internal error the operation's name; *domain.Error
// passes unchanged.
func wrap(err *error, op string) {
	var de *domain.Error
	if *err != nil && !errors.As(*err, &de) {
		*err = fmt.Errorf("sqlstore: %s: %w", op, *err)
	}
}

// like is a LIKE pattern (with ESCAPE '\') matching s anywhere, lowercased.
func like(s string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(strings.ToLower(s)) + "%"
}

// in is "col IN (?, ...)" for vals, with its arguments.
func in(col string, vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return col + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ") + ")", args
}

// newID is a random (version 4) UUID.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
