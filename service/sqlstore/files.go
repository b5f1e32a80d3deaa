package sqlstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"ferry/service/domain"
)

// A row of file_records holds the records of the files of one source
// directory that one Progress call recorded in one state, as recs: for
// each file, in order,
//
//	uvarint len(name), name      the source path after src_dir
//	uvarint d                    0: the destination is dst_dir+name; else
//	                             d-1 bytes of the destination path follow
//	varint  size
//	varint  time                 microseconds after the row's time
//	uvarint len, algorithm
//	uvarint len, checksum
//	uvarint len, error
//
// A page marker is a row's id times markerSpan plus the index in it of
// the last record given.
const markerSpan = 1 << 16

// maxRecs bounds the records of one row, below markerSpan.
const maxRecs = 1000

// recRow is a row of file_records being written.
type recRow struct {
	state, src, dst string
	time            int64
	n               int
	recs            []byte
}

// rowsOf groups files into rows: by state, source and destination
// directory, in the order each group first appears, at most maxRecs a
// row. A zero Time is now.
func rowsOf(files []domain.File, now time.Time) []*recRow {
	var rows []*recRow
	open := map[[3]string]*recRow{}
	for _, f := range files {
		src, name := domain.SplitDir(f.Src)
		dst, _ := domain.SplitDir(f.Dst)
		t := cmp.Or(f.Time, now).UnixMicro()
		key := [3]string{f.State, src, dst}
		r := open[key]
		if r == nil || r.n == maxRecs {
			r = &recRow{state: f.State, src: src, dst: dst, time: t}
			open[key] = r
			rows = append(rows, r)
		}
		r.n++
		r.recs = appendString(r.recs, name)
		if f.Dst == dst+name {
			r.recs = binary.AppendUvarint(r.recs, 0)
		} else {
			r.recs = binary.AppendUvarint(r.recs, uint64(len(f.Dst))+1)
			r.recs = append(r.recs, f.Dst...)
		}
		r.recs = binary.AppendVarint(r.recs, f.Size)
		r.recs = binary.AppendVarint(r.recs, t-r.time)
		r.recs = appendString(appendString(appendString(r.recs, f.Algorithm), f.Checksum), f.Error)
	}
	return rows
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// insertFiles stores the records of files, one statement for up to
// rowsPerInsert rows.
func insertFiles(ctx context.Context, c conn, taskID string, files []domain.File, now time.Time) error {
	rows := rowsOf(files, now)
	return insertMany(ctx, c, `INSERT INTO file_records (task_id, state, src_dir, dst_dir, time, recs) VALUES `, "", len(rows),
		func(i int) []any {
			r := rows[i]
			return []any{taskID, r.state, []byte(r.src), []byte(r.dst), r.time, r.recs}
		})
}

// rowsPerInsert bounds the rows of one insertMany statement, and so its
// arguments, within what the databases take.
const rowsPerInsert = 1000

// insertMany inserts n rows, the i-th of args(i), in statements of
// rowsPerInsert rows at most: q is the INSERT up to its VALUES, tail what
// follows them (an ON CONFLICT clause, or nothing).
func insertMany(ctx context.Context, c conn, q, tail string, n int, args func(i int) []any) error {
	for from := 0; from < n; from += rowsPerInsert {
		var b strings.Builder
		b.WriteString(q)
		var all []any
		for i := from; i < min(n, from+rowsPerInsert); i++ {
			a := args(i)
			if i > from {
				b.WriteString(", ")
			}
			b.WriteString("(?" + strings.Repeat(", ?", len(a)-1) + ")")
			all = append(all, a...)
		}
		b.WriteString(tail)
		if _, err := c.exec(ctx, b.String(), all...); err != nil {
			return err
		}
	}
	return nil
}

// errCorrupt is the error of a row that does not decode.
var errCorrupt = errors.New("file record does not decode")

// eachRec calls fn with each record of a row, in order, its State and
// TaskID not set; it stops at fn's error, or at a record that does not
// decode (errCorrupt).
func eachRec(src, dst string, t0 int64, recs []byte, fn func(domain.File) error) error {
	b := recs
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	sv := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	str := func(n uint64) string {
		if n > uint64(len(b)) {
			bad = true
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	for len(b) > 0 {
		var f domain.File
		name := str(uv())
		f.Src, f.Dst = src+name, dst+name
		if d := uv(); d > 0 {
			f.Dst = str(d - 1)
		}
		f.Size = sv()
		f.Time = time.UnixMicro(t0 + sv()).UTC()
		f.Algorithm, f.Checksum, f.Error = str(uv()), str(uv()), str(uv())
		if bad {
			return errCorrupt
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// A page reads rows minRows at a time, then twice as many each time up
// to maxRows: few queries whether a row holds one record or a thousand,
// and a few megabytes at most in hand.
const (
	minRows = 8
	maxRows = 128
)

func (db *DB) Files(ctx context.Context, taskID, state string, marker int64, limit int) (_ []domain.File, _ int64, err error) {
	defer wrap(&err, "files")
	limit = domain.Page{Limit: limit}.Normal().Limit
	q, args := `SELECT id, state, src_dir, dst_dir, time, recs FROM file_records WHERE task_id = ?`, []any{taskID}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	q += ` AND id >= ? ORDER BY id LIMIT ?`
	from, after := marker/markerSpan, int(marker%markerSpan)
	if marker == 0 {
		after = -1
	}
	var out []domain.File
	var next int64
	for n := minRows; ; n = min(2*n, maxRows) {
		type row struct {
			id       int64
			state    string
			src, dst []byte
			time     int64
			recs     []byte
		}
		rows, err := all(ctx, db.conn(), func(s scanner) (row, error) {
			var r row
			return r, s.Scan(&r.id, &r.state, &r.src, &r.dst, &r.time, &r.recs)
		}, q, append(args, from, n)...)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range rows {
			i := 0
			err := eachRec(string(r.src), string(r.dst), r.time, r.recs, func(f domain.File) error {
				if r.id == from && i <= after {
					i++
					return nil
				}
				if len(out) == limit {
					return errFull
				}
				f.TaskID, f.State = taskID, r.state
				out = append(out, f)
				next = r.id*markerSpan + int64(i)
				i++
				return nil
			})
			if errors.Is(err, errFull) {
				return out, next, nil
			}
			if err != nil {
				return nil, 0, err
			}
		}
		if len(rows) < n {
			return out, 0, nil
		}
		from, after = rows[len(rows)-1].id+1, -1
	}
}

// errFull stops a page that has all it wants and one more to come.
var errFull = errors.New("page full")

func (db *DB) RecordedIn(ctx context.Context, taskID, dir string, fn func(name, dst string)) (err error) {
	defer wrap(&err, "recorded files")
	rows, err := db.conn().query(ctx, `SELECT src_dir, dst_dir, recs FROM file_records WHERE task_id = ? AND src_dir = ?`, taskID, []byte(dir))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var src, dst, recs []byte
		if err := rows.Scan(&src, &dst, &recs); err != nil {
			return err
		}
		if err := eachRec(string(src), string(dst), 0, recs, func(f domain.File) error {
			fn(f.Src[len(src):], f.Dst)
			return nil
		}); err != nil {
			return err
		}
	}
	return rows.Err()
}

// moveFileRecords moves the rows of the old files table, one a file, to
// file_records (migration 016), a task's in the order they were
// recorded, a page at a time, and drops the old table.
func moveFileRecords(ctx context.Context, c conn) error {
	type old struct {
		id     int64
		taskID string
		domain.File
	}
	for after := int64(0); ; {
		rows, err := all(ctx, c, func(s scanner) (old, error) {
			var o old
			return o, s.Scan(&o.id, &o.taskID, &o.Src, &o.Dst, &o.Size, &o.State, &o.Algorithm, &o.Checksum, &o.Error, timeCol{&o.Time})
		}, `SELECT id, task_id, src, dst, size, state, algorithm, checksum, error, time FROM files WHERE id > ? ORDER BY id LIMIT 10000`, after)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		// Runs of one task's records, each run in one statement.
		for i := 0; i < len(rows); {
			j := i
			var files []domain.File
			for ; j < len(rows) && rows[j].taskID == rows[i].taskID && j-i < maxRecs; j++ {
				files = append(files, rows[j].File)
			}
			if err := insertFiles(ctx, c, rows[i].taskID, files, time.Now()); err != nil {
				return err
			}
			i = j
		}
		after = rows[len(rows)-1].id
	}
	_, err := c.exec(ctx, `DROP TABLE files`)
	return err
}
