package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"time"

	"ferry/service/domain"
)

// usesEndpoint selects tasks (of the table named tasks) that use an
// endpoint: the source, the destination or one of several, or as the
// relay of a destination (Endpoint.Via). Its arguments are usesArgs.
const usesEndpoint = `(src_endpoint = ? OR dst_endpoint = ? OR id IN (SELECT task_id FROM task_destinations WHERE endpoint = ?)
	OR dst_endpoint IN (SELECT id FROM endpoints WHERE via = ?)
	OR id IN (SELECT d.task_id FROM task_destinations d JOIN endpoints v ON v.id = d.endpoint WHERE v.via = ?))`

// usesArgs are usesEndpoint's arguments for endpoint id.
func usesArgs(id string) []any { return []any{id, id, id, id, id} }

// insertDests stores the destinations of a new task.
func insertDests(ctx context.Context, c conn, taskID string, dests []domain.Destination) error {
	for i, d := range dests {
		if _, err := c.exec(ctx, `INSERT INTO task_destinations (task_id, idx, endpoint, paths) VALUES (?, ?, ?, ?)`,
			taskID, i, d.Endpoint, jsonArg(d.Paths)); err != nil {
			return err
		}
	}
	return nil
}

// withDests fills in the destinations of tasks that have several.
func withDests(ctx context.Context, c conn, tasks []domain.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	cond, args := in("task_id", ids)
	type row struct {
		task string
		domain.Destination
	}
	rows, err := all(ctx, c, func(r scanner) (row, error) {
		var d row
		err := r.Scan(&d.task, &d.Endpoint, jsonCol{&d.Paths}, &d.FilesTransferred, &d.FilesSkipped, &d.FilesFailed, &d.BytesTransferred)
		return d, err
	}, `SELECT task_id, endpoint, paths, files_transferred, files_skipped, files_failed, bytes_transferred
		FROM task_destinations WHERE `+cond+` ORDER BY task_id, idx`, args...)
	if err != nil {
		return err
	}
	by := map[string][]domain.Destination{}
	for _, r := range rows {
		by[r.task] = append(by[r.task], r.Destination)
	}
	for i := range tasks {
		tasks[i].Destinations = by[tasks[i].ID]
	}
	return nil
}

// withDestsOne is withDests for one task.
func withDestsOne(ctx context.Context, c conn, t domain.Task, err error) (domain.Task, error) {
	if err != nil {
		return t, err
	}
	ts := []domain.Task{t}
	err = withDests(ctx, c, ts)
	return ts[0], err
}

// putDestFiles replaces the records of files at destinations and moves
// the destinations' counters from each file's old state to its new one.
func putDestFiles(ctx context.Context, c conn, taskID string, files []domain.DestFile, now time.Time) error {
	deltas := map[int]*domain.DestCounters{}
	count := func(dest int, state string, size, sign int64) {
		d := deltas[dest]
		if d == nil {
			d = &domain.DestCounters{}
			deltas[dest] = d
		}
		switch state {
		case domain.FileSucceeded:
			d.FilesTransferred += sign
			d.BytesTransferred += sign * size
		case domain.FileSkipped:
			d.FilesSkipped += sign
		case domain.FileFailed:
			d.FilesFailed += sign
		}
	}
	for _, f := range files {
		var state string
		var size int64
		err := c.row(ctx, `SELECT state, size FROM dest_files WHERE task_id = ? AND dest = ? AND src = ?`, taskID, f.Dest, f.Src).Scan(&state, &size)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			count(f.Dest, state, size, -1)
		}
		count(f.Dest, f.State, f.Size, 1)
		if _, err := c.exec(ctx, `INSERT INTO dest_files (task_id, dest, src, dst, size, state, error, time)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id, dest, src) DO UPDATE SET dst = excluded.dst, size = excluded.size,
			state = excluded.state, error = excluded.error, time = excluded.time`,
			taskID, f.Dest, f.Src, f.Dst, f.Size, f.State, f.Error, us(cmp.Or(f.Time, now))); err != nil {
			return err
		}
	}
	for dest, d := range deltas {
		if _, err := c.exec(ctx, `UPDATE task_destinations SET files_transferred = files_transferred + ?,
			files_skipped = files_skipped + ?, files_failed = files_failed + ?, bytes_transferred = bytes_transferred + ?
			WHERE task_id = ? AND idx = ?`, d.FilesTransferred, d.FilesSkipped, d.FilesFailed, d.BytesTransferred, taskID, dest); err != nil {
			return err
		}
	}
	return nil
}

// destFileRow is a destination's file record and its insertion marker.
type destFileRow struct {
	id int64
	domain.DestFile
}

func (db *DB) DestFiles(ctx context.Context, taskID string, dest int, state string, marker int64, limit int) (_ []domain.DestFile, _ int64, err error) {
	defer wrap(&err, "destination files")
	q, args := `SELECT id, dest, src, dst, size, state, error, time FROM dest_files WHERE task_id = ? AND id > ?`, []any{taskID, marker}
	if dest >= 0 {
		q += ` AND dest = ?`
		args = append(args, dest)
	}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	limit = domain.Page{Limit: limit}.Normal().Limit
	rows, err := all(ctx, db.conn(), func(r scanner) (destFileRow, error) {
		var f destFileRow
		err := r.Scan(&f.id, &f.Dest, &f.Src, &f.Dst, &f.Size, &f.State, &f.Error, timeCol{&f.Time})
		return f, err
	}, q+` ORDER BY id LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, 0, err
	}
	return page(rows, limit, func(r destFileRow) (int64, domain.DestFile) { return r.id, r.DestFile })
}
