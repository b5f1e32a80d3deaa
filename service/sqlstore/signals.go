package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// Signals. A write that must reach running work at once (a cancel, a
// canceled file, a new deadline, a changed endpoint) adds a row to the
// signals table in its own transaction. Each DB runs one reader while
// anybody watches: it reads the rows past the last one it saw when this
// process wrote one, when PostgreSQL notifies it that another process did
// (LISTEN/NOTIFY), and every poll interval in any case (SQLite has no
// notifications between processes; on PostgreSQL the poll only covers a
// lost notification).

const (
	signalChannel = "ferry_signals"
	keepSignals   = 10 * time.Minute
)

// pollEvery is how often the reader looks for other processes' signals
// without being told.
func (d *dialect) pollEvery() time.Duration {
	if d.notify {
		return 5 * time.Second
	}
	return 200 * time.Millisecond
}

// signal records, in the transaction of c, that tasks ids must be looked
// at again.
func signal(ctx context.Context, c conn, ids ...string) error {
	now := us(time.Now())
	for _, id := range ids {
		if _, err := c.exec(ctx, `INSERT INTO signals (task_id, at) VALUES (?, ?)`, id, now); err != nil {
			return err
		}
	}
	if c.d.notify && len(ids) > 0 {
		_, err := c.exec(ctx, `SELECT pg_notify('`+signalChannel+`', '')`)
		return err
	}
	return nil
}

// signaled runs fn in a transaction that may signal tasks, and wakes this
// process's reader once it is committed.
func (db *DB) signaled(ctx context.Context, fn func(c conn) error) error {
	err := db.inTx(ctx, fn)
	if err == nil {
		db.hub.wake()
	}
	return err
}

// hub fans the signals one reader finds out to the DB's watchers.
type hub struct {
	mu      sync.Mutex
	subs    map[chan string]bool
	running bool
	nudge   chan struct{}
}

func (h *hub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nudge != nil {
		select {
		case h.nudge <- struct{}{}:
		default:
		}
	}
}

// Watch reports the IDs of tasks signaled after it is called, by this
// process or another, until ctx ends; then the channel is closed. An
// empty ID means that signals may have been missed: look at every task.
func (db *DB) Watch(ctx context.Context) (<-chan string, error) {
	var last int64
	if err := db.conn().row(ctx, `SELECT COALESCE(MAX(seq), 0) FROM signals`).Scan(&last); err != nil {
		return nil, err
	}
	ch := make(chan string, 256)
	h := &db.hub
	h.mu.Lock()
	if h.subs == nil {
		h.subs, h.nudge = map[chan string]bool{}, make(chan struct{}, 1)
	}
	h.subs[ch] = true
	var ready chan struct{}
	if !h.running {
		h.running, ready = true, make(chan struct{})
		go db.readSignals(last, ready)
	}
	h.mu.Unlock()
	if ready != nil {
		<-ready // PostgreSQL listens: no notification is lost from now on
	}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[ch] {
			delete(h.subs, ch)
			close(ch)
		}
	})
	return ch, nil
}

// readSignals is the reader: it runs while anybody watches and the DB is
// open. It closes ready once it listens (PostgreSQL) or at once.
func (db *DB) readSignals(last int64, ready chan struct{}) {
	h := &db.hub
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if db.d.notify {
		go db.listen(ctx, ready)
	} else {
		close(ready)
	}
	t := time.NewTicker(db.d.pollEvery())
	defer t.Stop()
	pruned := time.Now()
	for first := true; ; first = false {
		if !first { // the first read covers what came before the listening
			select {
			case <-h.nudge:
			case <-t.C:
			case <-db.closed:
				return
			}
		}
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ids, seq, err := db.signalsAfter(ctx, last)
		if err != nil {
			if errors.Is(err, sql.ErrConnDone) {
				return
			}
			continue
		}
		last = seq
		h.deliver(ids)
		if time.Since(pruned) > time.Minute {
			pruned = time.Now()
			db.conn().exec(ctx, `DELETE FROM signals WHERE at < ?`, us(pruned.Add(-keepSignals)))
		}
	}
}

// signalsAfter reads the task IDs signaled after seq, and the last seq.
func (db *DB) signalsAfter(ctx context.Context, seq int64) ([]string, int64, error) {
	rows, err := db.conn().query(ctx, `SELECT seq, task_id FROM signals WHERE seq > ? ORDER BY seq`, seq)
	if err != nil {
		return nil, seq, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			return nil, seq, err
		}
		ids = append(ids, id)
	}
	return ids, seq, rows.Err()
}

// deliver hands ids to every watcher; one that is too slow to take them
// gets "" (look at everything) instead, once there is room.
func (h *hub) deliver(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		for _, id := range ids {
			select {
			case ch <- id:
				continue
			default:
			}
			select {
			case <-ch: // make room for the catch-all
			default:
			}
			select {
			case ch <- "":
			default:
			}
			break
		}
	}
}

// listen wakes the reader whenever PostgreSQL delivers a notification on
// the signal channel, on a connection of its own, until ctx ends. It
// closes ready once it listens for the first time (or failed to).
func (db *DB) listen(ctx context.Context, ready chan struct{}) {
	for ctx.Err() == nil {
		db.listenOnce(ctx, ready)
		ready = nil
		if ctx.Err() != nil {
			return
		}
		// The poll covers the gap; try again shortly.
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		db.hub.wake() // notifications may have been lost meanwhile
	}
}

func (db *DB) listenOnce(ctx context.Context, ready chan struct{}) error {
	defer func() {
		if ready != nil { // failed before listening
			close(ready)
		}
	}()
	c, err := db.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `LISTEN `+signalChannel); err != nil {
		return err
	}
	if ready != nil {
		close(ready)
		ready = nil
	}
	return c.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				return err
			}
			db.hub.wake()
		}
	})
}
