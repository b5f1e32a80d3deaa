package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"ferry/service/domain"
)

// CreateTask stores t as a new ACTIVE, queued task with a QUEUED event.
// It sets ID, Status, NiceStatus and (if zero) RequestTime, and clears
// what only a worker sets.
func (db *DB) CreateTask(ctx context.Context, t *domain.Task) (err error) {
	defer wrap(&err, "create task")
	nt := domain.Task{
		ID:           newID(),
		UserID:       t.UserID,
		SubmissionID: t.SubmissionID,
		Type:         t.Type,
		Label:        t.Label,
		Status:       domain.StatusActive,
		NiceStatus:   domain.NiceQueued,
		SrcEndpoint:  t.SrcEndpoint,
		DstEndpoint:  t.DstEndpoint,
		Items:        t.Items,
		Options:      t.Options,
		Destinations: destsOf(t.Destinations),
		Deadline:     stored(t.Deadline),
		RequestTime:  orNow(t.RequestTime),
	}
	if len(nt.Destinations) > 0 {
		nt.DstEndpoint = nt.Destinations[0].Endpoint
	}
	var sub any // NULL: no submission ID, so never a duplicate
	if nt.SubmissionID != "" {
		sub = nt.SubmissionID
	}
	return db.inTx(ctx, func(c conn) error {
		var id string
		err := c.row(ctx, `INSERT INTO tasks (id, user_id, submission_id, type, label, status, nice_status,
			src_endpoint, dst_endpoint, items, options, deadline, request_time)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (user_id, submission_id) DO NOTHING RETURNING id`,
			nt.ID, nt.UserID, sub, nt.Type, nt.Label, nt.Status, nt.NiceStatus, nt.SrcEndpoint, nt.DstEndpoint,
			jsonArg(nt.Items), jsonArg(nt.Options), us(nt.Deadline), us(nt.RequestTime)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			old, err := taskWhere(ctx, c, `user_id = ? AND submission_id = ?`, nt.UserID, nt.SubmissionID)
			if err != nil {
				return err
			}
			old.Items = nil // as every read leaves them
			*t = old
			return domain.Errorf(domain.EDuplicate, "submission ID %s was used before, by task %s", nt.SubmissionID, old.ID)
		}
		if err != nil {
			return err
		}
		if err := insertDests(ctx, c, nt.ID, nt.Destinations); err != nil {
			return err
		}
		if err := addEvents(ctx, c, nt.RequestTime, domain.Event{TaskID: nt.ID, Code: domain.EventQueued,
			Description: "task queued"}); err != nil {
			return err
		}
		*t = nt
		return nil
	})
}

// destsOf is a new task's destinations, with no counts yet.
func destsOf(ds []domain.Destination) []domain.Destination {
	var out []domain.Destination
	for _, d := range ds {
		out = append(out, domain.Destination{Endpoint: d.Endpoint, Paths: d.Paths})
	}
	return out
}

// taskCols are a task's columns but its items, which may be many: a task
// is read on every heartbeat and listed with others (TaskItems reads them).
const taskCols = `id, user_id, COALESCE(submission_id, ''), type, label, status, nice_status, fatal_error,
	src_endpoint, dst_endpoint, options, deadline, request_time, start_time, completion_time,
	files, directories, files_transferred, files_skipped, files_failed, bytes_transferred, bytes_total,
	bytes_checksummed, faults, cancel_requested, COALESCE(worker, ''), lease_expires`

func scanTask(r scanner) (domain.Task, error) {
	var t domain.Task
	err := r.Scan(&t.ID, &t.UserID, &t.SubmissionID, &t.Type, &t.Label, &t.Status, &t.NiceStatus,
		jsonCol{&t.FatalError}, &t.SrcEndpoint, &t.DstEndpoint, jsonCol{&t.Options},
		timeCol{&t.Deadline}, timeCol{&t.RequestTime}, timeCol{&t.StartTime}, timeCol{&t.CompletionTime},
		&t.Files, &t.Directories, &t.FilesTransferred, &t.FilesSkipped, &t.FilesFailed, &t.BytesTransferred,
		&t.BytesTotal, &t.BytesChecksummed, &t.Faults, &t.CancelRequested, &t.Worker, timeCol{&t.LeaseExpires})
	return t, err
}

// taskWhere reads the one task matching where; ENotFound if none.
func taskWhere(ctx context.Context, c conn, where string, args ...any) (domain.Task, error) {
	t, err := scanTask(c.row(ctx, `SELECT `+taskCols+` FROM tasks WHERE `+where, args...))
	return withDestsOne(ctx, c, t, missing(err, "task"))
}

func (db *DB) TaskItems(ctx context.Context, id string) (_ []domain.Item, err error) {
	defer wrap(&err, "task items")
	var items []domain.Item
	err = db.conn().row(ctx, `SELECT items FROM tasks WHERE id = ?`, id).Scan(jsonCol{&items})
	return items, missing(err, "task")
}

func (db *DB) Task(ctx context.Context, userID int64, id string) (_ domain.Task, err error) {
	defer wrap(&err, "task")
	return taskWhere(ctx, db.conn(), `id = ? AND user_id = ?`, id, userID)
}

func (db *DB) TaskByID(ctx context.Context, id string) (_ domain.Task, err error) {
	defer wrap(&err, "task by ID")
	return taskWhere(ctx, db.conn(), `id = ?`, id)
}

// Tasks lists userID's tasks by request time; the label filter is
// case-insensitive.
func (db *DB) Tasks(ctx context.Context, userID int64, f domain.TaskFilter, page domain.Page) (_ []domain.Task, _ int, err error) {
	defer wrap(&err, "tasks")
	where, args := ` WHERE user_id = ?`, []any{userID}
	for _, sel := range []struct {
		col  string
		vals []string
	}{{"status", f.Status}, {"type", f.Type}} {
		if len(sel.vals) > 0 {
			cond, a := in(sel.col, sel.vals)
			where += ` AND ` + cond
			args = append(args, a...)
		}
	}
	if f.Label != "" {
		where += ` AND LOWER(label) LIKE ? ESCAPE '\'`
		args = append(args, like(f.Label))
	}
	order := ` ORDER BY request_time, num`
	if f.Newest {
		order = ` ORDER BY request_time DESC, num DESC`
	}
	c := db.conn()
	total, err := count(ctx, c, `SELECT COUNT(*) FROM tasks`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	page = page.Normal()
	tasks, err := all(ctx, c, scanTask, `SELECT `+taskCols+` FROM tasks`+where+order+` LIMIT ? OFFSET ?`,
		append(args, page.Limit, page.Offset)...)
	if err == nil {
		err = withDests(ctx, c, tasks)
	}
	return tasks, total, err
}

func (db *DB) UpdateTask(ctx context.Context, userID int64, id, label string, deadline time.Time) (err error) {
	defer wrap(&err, "update task")
	return db.signaled(ctx, func(c conn) error {
		n, err := c.exec(ctx, `UPDATE tasks SET label = ?, deadline = ? WHERE id = ? AND user_id = ?`,
			label, us(deadline), id, userID)
		if err = changed(n, err, "task %s", id); err != nil {
			return err
		}
		return signal(ctx, c, id)
	})
}

// notRunning selects ACTIVE tasks that no worker holds: queued, or whose
// worker's lease expired. Its one argument is now.
const notRunning = `status = 'ACTIVE' AND (worker IS NULL OR lease_expires <= ?)`

// canceledByUser is the fatal error of a task canceled before it ran.
var canceledByUser = domain.FatalError{Code: "CANCELED", Description: "canceled by the user"}

func (db *DB) RequestCancel(ctx context.Context, userID int64, id string, now time.Time) (t domain.Task, err error) {
	defer wrap(&err, "cancel task")
	err = db.signaled(ctx, func(c conn) error {
		n, err := c.exec(ctx, `UPDATE tasks SET status = 'FAILED', nice_status = '', fatal_error = ?,
			completion_time = ?, cancel_requested = TRUE, worker = NULL, lease_expires = NULL
			WHERE id = ? AND user_id = ? AND (status = 'INACTIVE' OR `+notRunning+`)`,
			jsonArg(canceledByUser), us(now), id, userID, us(now))
		if err != nil {
			return err
		}
		if n == 1 {
			err = addEvents(ctx, c, now, domain.Event{TaskID: id, Code: domain.EventCanceled,
				Description: canceledByUser.Description})
		} else {
			if n, err = c.exec(ctx, `UPDATE tasks SET cancel_requested = TRUE WHERE id = ? AND user_id = ? AND status = 'ACTIVE'`,
				id, userID); err == nil && n == 1 {
				err = signal(ctx, c, id)
			}
		}
		if err != nil {
			return err
		}
		t, err = taskWhere(ctx, c, `id = ? AND user_id = ?`, id, userID)
		return err
	})
	return t, err
}

// CancelFile marks src of a task of userID canceled; EConflict if the
// task is done.
func (db *DB) CancelFile(ctx context.Context, userID int64, id, src string) (err error) {
	defer wrap(&err, "cancel file")
	return db.signaled(ctx, func(c conn) error {
		t, err := taskWhere(ctx, c, `id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return err
		}
		if domain.Done(t.Status) {
			return domain.Errorf(domain.EConflict, "task %s is already %s", id, t.Status)
		}
		if _, err = c.exec(ctx, `INSERT INTO canceled_files (task_id, src) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, src); err != nil {
			return err
		}
		return signal(ctx, c, id)
	})
}

func (db *DB) CanceledFiles(ctx context.Context, taskID string) (_ []string, err error) {
	defer wrap(&err, "canceled files")
	return all(ctx, db.conn(), scanString, `SELECT src FROM canceled_files WHERE task_id = ? ORDER BY src`, taskID)
}

func scanString(r scanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

// live selects tasks aliased l that hold a live lease. Its one argument
// is now.
const live = `l.worker IS NOT NULL AND l.lease_expires > ?`

// claimQuery selects the task to claim, reading the queue user by user
// rather than task by task, so that its cost grows with the number of
// users who have tasks queued, not with the number of tasks (see
// Claim). Its arguments: now three times (leases per endpoint, leases per
// user, runnable), then perUser twice (0: no limit).
//
//   - full: the endpoints running as many tasks as their limit allows,
//     counted once;
//   - queued: the users with ACTIVE tasks, one index seek each (a loose
//     index scan of tasks_queue);
//   - users: each one's live leases, counted once (tasks_leased), less
//     those at the per-user limit, whose backlog is never read;
//   - firsts: each remaining user's oldest runnable task that uses no
//     full endpoint;
//   - of those, the task of the user running fewest, oldest first: users
//     with backlogs take turns.
const claimQuery = `WITH RECURSIVE full_endpoints (id) AS (
		SELECT e.id FROM endpoints e WHERE e.max_concurrent > 0
			AND (SELECT COUNT(*) FROM tasks l WHERE ` + live + ` AND (l.src_endpoint = e.id OR l.dst_endpoint = e.id
				OR l.id IN (SELECT d.task_id FROM task_destinations d WHERE d.endpoint = e.id))) >= e.max_concurrent
	), queued (user_id) AS (
		SELECT (SELECT q.user_id FROM tasks q{{queue}} WHERE q.status = 'ACTIVE' ORDER BY q.user_id LIMIT 1)
		UNION ALL
		SELECT (SELECT q.user_id FROM tasks q{{queue}} WHERE q.status = 'ACTIVE' AND q.user_id > u.user_id ORDER BY q.user_id LIMIT 1)
			FROM queued u WHERE u.user_id IS NOT NULL
	), users (user_id, running) AS (
		SELECT u.user_id, (SELECT COUNT(*) FROM tasks l WHERE l.user_id = u.user_id AND ` + live + `)
			FROM queued u WHERE u.user_id IS NOT NULL
	), firsts (running, num) AS (
		SELECT u.running, (SELECT t.num FROM tasks t{{queue}} WHERE t.user_id = u.user_id AND ` + notRunning + `
			AND NOT EXISTS (SELECT 1 FROM full_endpoints f WHERE f.id IN (t.src_endpoint, t.dst_endpoint)
				OR f.id IN (SELECT d.endpoint FROM task_destinations d WHERE d.task_id = t.id))
			ORDER BY t.request_time, t.num LIMIT 1)
			FROM users u WHERE ? <= 0 OR u.running < ?
	)
	SELECT t.id, COALESCE(t.worker, '') FROM tasks t WHERE t.num = (
		SELECT f.num FROM firsts f WHERE f.num IS NOT NULL
			ORDER BY f.running, (SELECT c.request_time FROM tasks c WHERE c.num = f.num), f.num LIMIT 1
	){{skiplocked}}`

// Claim takes the claim lock first, so that no two claims, even in two
// processes, count the same leases: the per-user and per-endpoint limits
// hold. It holds the lock for one short query (claimQuery): a long queue
// neither slows it nor keeps submissions, which SQLite queues behind
// the claim's write lock, waiting. When it takes over a task from another
// worker whose lease expired it appends a LEASE_TAKEN event.
func (db *DB) Claim(ctx context.Context, worker string, now time.Time, lease time.Duration, perUser int) (t domain.Task, err error) {
	defer wrap(&err, "claim")
	err = db.inTx(ctx, func(c conn) error {
		if err := c.lock(ctx, lockClaim); err != nil {
			return err
		}
		if c.d.noJIT != "" {
			if _, err := c.exec(ctx, c.d.noJIT); err != nil {
				return err
			}
		}
		var id, prev string
		if err := c.row(ctx, claimQuery, us(now), us(now), us(now), perUser, perUser).Scan(&id, &prev); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return domain.Errorf(domain.ENotFound, "no task to run")
			}
			return err
		}
		var err error
		// Taking over from another worker is a fault of the task: its
		// process stopped, or lost the database, while the task ran.
		fault := 0
		if prev != "" && prev != worker {
			fault = 1
		}
		t, err = scanTask(c.row(ctx, `UPDATE tasks SET worker = ?, lease_expires = ?, nice_status = ?,
			start_time = COALESCE(start_time, ?), faults = faults + ? WHERE id = ? RETURNING `+taskCols,
			worker, us(now.Add(lease)), domain.NiceOK, us(now), fault, id))
		t, err = withDestsOne(ctx, c, t, err)
		if err != nil || fault == 0 {
			return err
		}
		return addEvents(ctx, c, now, domain.Event{TaskID: id, Code: domain.EventLeaseTaken, IsError: true,
			Description: fmt.Sprintf("%s took over the task from %s, whose lease expired: resumed after a service restart "+
				"or a lost database; what was in flight is sent again from the last recorded restart markers", worker, prev)})
	})
	return t, err
}

func (db *DB) Reclaim(ctx context.Context, worker string, now time.Time, lease time.Duration) (tasks []domain.Task, err error) {
	defer wrap(&err, "reclaim")
	err = db.inTx(ctx, func(c conn) error {
		var err error
		tasks, err = all(ctx, c, scanTask, `UPDATE tasks SET lease_expires = ?, nice_status = ?, faults = faults + 1
			WHERE worker = ? AND status = 'ACTIVE' RETURNING `+taskCols, us(now.Add(lease)), domain.NiceOK, worker)
		if err != nil {
			return err
		}
		events := make([]domain.Event, len(tasks))
		for i, t := range tasks {
			events[i] = domain.Event{TaskID: t.ID, Code: domain.EventRestarted, IsError: true,
				Description: fmt.Sprintf("resumed after a service restart: %s stopped while the task ran and took it back; "+
					"what was in flight is sent again from the last recorded restart markers", worker)}
		}
		if err := addEvents(ctx, c, now, events...); err != nil {
			return err
		}
		return withDests(ctx, c, tasks)
	})
	return tasks, err
}

func (db *DB) Heartbeat(ctx context.Context, taskID, worker string, now time.Time, lease time.Duration) (_ domain.Task, err error) {
	defer wrap(&err, "heartbeat")
	t, err := scanTask(db.conn().row(ctx, `UPDATE tasks SET lease_expires = ? WHERE `+held+` RETURNING `+taskCols,
		us(now.Add(lease)), taskID, worker))
	if errors.Is(err, sql.ErrNoRows) {
		err = lost(taskID)
	}
	return withDestsOne(ctx, db.conn(), t, err)
}

// held selects the task whose lease the worker holds. Its arguments are
// the task ID and the worker.
const held = `id = ? AND worker = ? AND status = 'ACTIVE'`

// lost is the error of a worker that no longer holds the lease.
func lost(taskID string) error {
	return domain.Errorf(domain.ENotFound, "lease of task %s not found", taskID)
}

func (db *DB) Progress(ctx context.Context, taskID, worker string, b domain.Batch) (err error) {
	defer wrap(&err, "progress")
	d := b.Delta
	return db.inTx(ctx, func(c conn) error {
		n, err := c.exec(ctx, `UPDATE tasks SET files = files + ?, directories = directories + ?,
			files_transferred = files_transferred + ?, files_skipped = files_skipped + ?, files_failed = files_failed + ?,
			bytes_transferred = bytes_transferred + ?, bytes_total = bytes_total + ?,
			bytes_checksummed = bytes_checksummed + ?, faults = faults + ?
			WHERE `+held,
			d.Files, d.Directories, d.FilesTransferred, d.FilesSkipped, d.FilesFailed, d.BytesTransferred,
			d.BytesTotal, d.BytesChecksummed, d.Faults, taskID, worker)
		if err != nil {
			return err
		}
		if n == 0 {
			return lost(taskID)
		}
		now := time.Now()
		if err := insertFiles(ctx, c, taskID, b.Files, now); err != nil {
			return err
		}
		if err := putDestFiles(ctx, c, taskID, b.DestFiles, now); err != nil {
			return err
		}
		if err := insertMany(ctx, c, `INSERT INTO deleted_paths (task_id, dest, path, dir, size, time) VALUES `, "", len(b.Deletions),
			func(i int) []any {
				d := b.Deletions[i]
				return []any{taskID, d.Dest, d.Path, d.Dir, d.Size, us(cmp.Or(d.Time, now))}
			}); err != nil {
			return err
		}
		if err := putPartials(ctx, c, taskID, b.Partials); err != nil {
			return err
		}
		return addEvents(ctx, c, now, forTask(taskID, b.Events)...)
	})
}

// putPartials writes the partial records of ps, and deletes those without a
// State, a statement for each rowsPerInsert of them: a tar stream's files
// each start with one, and a statement each was most of the service's time.
func putPartials(ctx context.Context, c conn, taskID string, ps []domain.Partial) error {
	var put, gone []domain.Partial
	for _, p := range ps {
		if p.State == "" {
			gone = append(gone, p)
		} else {
			put = append(put, p)
		}
	}
	err := insertMany(ctx, c, `INSERT INTO partials (task_id, src, state, size, have) VALUES `,
		` ON CONFLICT (task_id, src) DO UPDATE SET state = excluded.state, size = excluded.size, have = excluded.have`, len(put),
		func(i int) []any { return []any{taskID, put[i].Src, put[i].State, put[i].Size, put[i].Have} })
	for from := 0; err == nil && from < len(gone); from += rowsPerInsert {
		part := gone[from:min(len(gone), from+rowsPerInsert)]
		args := []any{taskID}
		for _, p := range part {
			args = append(args, p.Src)
		}
		_, err = c.exec(ctx, `DELETE FROM partials WHERE task_id = ? AND src IN (?`+strings.Repeat(", ?", len(part)-1)+`)`, args...)
	}
	return err
}

// partialRow is a partial record and its marker.
type partialRow struct {
	id int64
	domain.Partial
}

func (db *DB) Partials(ctx context.Context, taskID string, marker int64, limit int) (_ []domain.Partial, _ int64, err error) {
	defer wrap(&err, "partials")
	limit = domain.Page{Limit: limit}.Normal().Limit
	rows, err := all(ctx, db.conn(), func(r scanner) (partialRow, error) {
		var p partialRow
		err := r.Scan(&p.id, &p.Src, &p.State, &p.Size, &p.Have)
		return p, err
	}, `SELECT id, src, state, size, have FROM partials WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?`, taskID, marker, limit+1)
	if err != nil {
		return nil, 0, err
	}
	return page(rows, limit, func(r partialRow) (int64, domain.Partial) { return r.id, r.Partial })
}

// forTask is events with their TaskID set to taskID.
func forTask(taskID string, events []domain.Event) []domain.Event {
	out := make([]domain.Event, len(events))
	for i, e := range events {
		e.TaskID = taskID
		out[i] = e
	}
	return out
}

func (db *DB) SetStatus(ctx context.Context, taskID, worker, status, nice string, fatal *domain.FatalError, now time.Time, events []domain.Event) (err error) {
	defer wrap(&err, "set status")
	var completed time.Time
	if domain.Done(status) {
		completed = now
	}
	return db.inTx(ctx, func(c conn) error {
		n, err := c.exec(ctx, `UPDATE tasks SET status = ?, nice_status = ?, fatal_error = ?, completion_time = ?,
			worker = NULL, lease_expires = NULL WHERE `+held,
			status, nice, jsonArg(fatal), us(completed), taskID, worker)
		if err != nil {
			return err
		}
		if n == 0 {
			return lost(taskID)
		}
		return addEvents(ctx, c, now, forTask(taskID, events)...)
	})
}

// setStatusOf moves the tasks that use endpointID and that where (with
// args) selects to status with the nice status, releasing any lease, and
// gives each an event; it returns how many.
func (db *DB) setStatusOf(ctx context.Context, endpointID, where, status, nice string, now time.Time, ev domain.Event, args ...any) (int, error) {
	var ids []string
	err := db.inTx(ctx, func(c conn) error {
		var err error
		ids, err = all(ctx, c, scanString, `UPDATE tasks SET status = ?, nice_status = ?, worker = NULL, lease_expires = NULL
			WHERE `+usesEndpoint+` AND `+where+` RETURNING id`,
			append(append([]any{status, nice}, usesArgs(endpointID)...), args...)...)
		if err != nil {
			return err
		}
		events := make([]domain.Event, len(ids))
		for i, id := range ids {
			events[i] = ev
			events[i].TaskID = id
		}
		return addEvents(ctx, c, now, events...)
	})
	return len(ids), err
}

func (db *DB) ResumeTask(ctx context.Context, userID int64, id string, now time.Time) (err error) {
	defer wrap(&err, "resume task")
	return db.inTx(ctx, func(c conn) error {
		t, err := taskWhere(ctx, c, `id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return err
		}
		if t.Status != domain.StatusInactive {
			return domain.Errorf(domain.EConflict, "task %s is %s, not INACTIVE: there is nothing to resume", id, t.Status)
		}
		if _, err := c.exec(ctx, `UPDATE tasks SET status = 'ACTIVE', nice_status = ? WHERE id = ?`, domain.NiceQueued, id); err != nil {
			return err
		}
		return addEvents(ctx, c, now, domain.Event{TaskID: id, Code: domain.EventResumed,
			Description: "resumed by the user (it waited: " + t.NiceStatus + ")"})
	})
}

func (db *DB) Reactivate(ctx context.Context, userID int64, endpointID string, now time.Time) (_ int, err error) {
	defer wrap(&err, "reactivate")
	return db.setStatusOf(ctx, endpointID, `user_id = ? AND status = 'INACTIVE'`, domain.StatusActive, domain.NiceQueued, now,
		domain.Event{Code: domain.EventResumed, Description: "endpoint activated; task resumed"}, userID)
}

func (db *DB) ResumeEndpoint(ctx context.Context, endpointID, nice string, now time.Time) (_ int, err error) {
	defer wrap(&err, "resume endpoint")
	return db.setStatusOf(ctx, endpointID, `status = 'INACTIVE' AND nice_status = ?`, domain.StatusActive, domain.NiceQueued, now,
		domain.Event{Code: domain.EventResumed, Description: "the endpoint is back; task resumed"}, nice)
}

func (db *DB) Deactivate(ctx context.Context, userID int64, endpointID, nice string, now time.Time) (_ int, err error) {
	defer wrap(&err, "deactivate")
	return db.setStatusOf(ctx, endpointID, `user_id = ? AND `+notRunning, domain.StatusInactive, nice, now,
		domain.Event{Code: domain.EventInactive, Description: "task paused: " + nice}, userID, us(now))
}

// deletionRow is a deletion and its insertion marker.
type deletionRow struct {
	id int64
	domain.Deletion
}

func (db *DB) Deletions(ctx context.Context, taskID string, marker int64, limit int) (_ []domain.Deletion, _ int64, err error) {
	defer wrap(&err, "deletions")
	limit = domain.Page{Limit: limit}.Normal().Limit
	rows, err := all(ctx, db.conn(), func(r scanner) (deletionRow, error) {
		var d deletionRow
		err := r.Scan(&d.id, &d.Dest, &d.Path, &d.Dir, &d.Size, timeCol{&d.Time})
		return d, err
	}, `SELECT id, dest, path, dir, size, time FROM deleted_paths WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?`, taskID, marker, limit+1)
	if err != nil {
		return nil, 0, err
	}
	return page(rows, limit, func(r deletionRow) (int64, domain.Deletion) { return r.id, r.Deletion })
}

// page is the first limit of rows, read one past it (limit+1), and the
// marker of the next page: the id of the last row given, 0 at the end.
func page[R, T any](rows []R, limit int, item func(R) (int64, T)) ([]T, int64, error) {
	var next int64
	if len(rows) > limit {
		rows = rows[:limit]
		next, _ = item(rows[limit-1])
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		_, out[i] = item(r)
	}
	return out, next, nil
}

// Events reads a page by Seq: a task's events are numbered 1, 2, ... with
// none missing (addEvents), so the page at an offset starts after that
// Seq and the total is the task's last Seq. A page of a long history
// costs what the first one does: no OFFSET, no COUNT.
func (db *DB) Events(ctx context.Context, taskID string, page domain.Page) (_ []domain.Event, _ int, err error) {
	defer wrap(&err, "events")
	c := db.conn()
	var total int
	if err := c.row(ctx, `SELECT last_seq FROM tasks WHERE id = ?`, taskID).Scan(&total); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, err
	}
	page = page.Normal()
	events, err := all(ctx, c, func(r scanner) (domain.Event, error) {
		var e domain.Event
		err := r.Scan(&e.TaskID, &e.Seq, &e.Code, &e.Description, &e.Details, &e.IsError, timeCol{&e.Time})
		return e, err
	}, `SELECT task_id, seq, code, description, details, is_error, time FROM events WHERE task_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, taskID, page.Offset, page.Limit)
	return events, total, err
}

// AddEvents appends events, each to its TaskID's history; ENotFound if a
// task is missing, and then none is stored.
func (db *DB) AddEvents(ctx context.Context, events []domain.Event) (err error) {
	defer wrap(&err, "add events")
	return db.inTx(ctx, func(c conn) error { return addEvents(ctx, c, time.Now(), events...) })
}

// addEvents appends events, numbering each after its task's last one
// (the task row's counter, so concurrent appends never share a Seq); a
// zero Time is now.
func addEvents(ctx context.Context, c conn, now time.Time, events ...domain.Event) error {
	for _, e := range events {
		var seq int64
		err := c.row(ctx, `UPDATE tasks SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq`, e.TaskID).Scan(&seq)
		if err != nil {
			return missing(err, "task %s", e.TaskID)
		}
		if _, err := c.exec(ctx, `INSERT INTO events (task_id, seq, code, description, details, is_error, time)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, e.TaskID, seq, e.Code, e.Description, e.Details, e.IsError, us(cmp.Or(e.Time, now))); err != nil {
			return err
		}
	}
	return nil
}

// TaskCounts counts every task by status, in one query.
func (db *DB) TaskCounts(ctx context.Context) (_ map[string]int, err error) {
	defer wrap(&err, "count tasks")
	type row struct {
		status string
		n      int
	}
	rows, err := all(ctx, db.conn(), func(s scanner) (row, error) {
		var r row
		return r, s.Scan(&r.status, &r.n)
	}, `SELECT status, COUNT(*) FROM tasks GROUP BY status`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.status] = r.n
	}
	return out, nil
}
