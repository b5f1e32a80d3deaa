// Package worker runs the service's tasks. A Worker claims runnable tasks
// from the store with a lease, keeps each lease with heartbeats, drives the
// transfer engine between the task's endpoints (or deletes through
// domain.FileOps), persists progress in batches, and ends each task
// SUCCEEDED, FAILED or INACTIVE with events and notifications.
//
// Several workers, in one process or in many sharing a database, share the
// work. A task whose worker dies is claimed again once its lease lapses and
// resumes from what was persisted: no file recorded as done is sent again.
// A worker whose context ends stops its engines, persists what it has and
// releases its leases (the tasks go back to the queue at once); a worker
// that cannot reach the store any more leaves its leases to lapse.
package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"ferry/engine"
	"ferry/gsi"
	"ferry/internal/netpolicy"
	"ferry/service/domain"
	"ferry/service/secret"
)

// Notifier tells a user that a task ended or went INACTIVE.
type Notifier interface {
	Notify(ctx context.Context, user domain.User, task domain.Task) error
}

// CopyFunc is engine.Copy's signature.
type CopyFunc func(ctx context.Context, src, dst engine.Endpoint, items []engine.Item, opts engine.Options, rep engine.Reporter) (engine.Result, error)

// CopyManyFunc is engine.CopyMany's signature: tasks with several
// destinations.
type CopyManyFunc func(ctx context.Context, src engine.Endpoint, targets []engine.Target, opts engine.Options, rep engine.Reporter) (engine.MultiResult, error)

// Worker runs tasks. Store, Box, Ops and ID are required; every other
// field has a default.
type Worker struct {
	Store  domain.Store
	Box    *secret.Box    // opens the activations
	Ops    domain.FileOps // delete tasks
	Agents domain.Agents  // reaches connect endpoints' agents; nil: none
	// Networks says which addresses endpoints' servers may have (see
	// gridops.Servers); nil: any.
	Networks *netpolicy.Policy
	// Trust holds the CAs that gsi endpoints' servers are checked
	// against (see gridops.Auth); nil: gsi endpoints cannot be reached.
	Trust  *gsi.Trust
	Notify Notifier // nil: no notifications
	ID     string   // unique among the workers sharing the store, e.g. host:pid

	Lease          time.Duration // how long a claim lasts without heartbeat; 0: 1 min
	HeartbeatEvery time.Duration // 0: Lease/3
	Poll           time.Duration // look for work this often when idle (and on Wake); 0: 1 s
	Tasks          int           // tasks this worker runs at once; 0: 16
	PerUser        int           // leased tasks per user across all workers, more queue; 0: no limit
	FlushEvery     time.Duration // persist progress this often; 0: 1 s
	FlushFiles     int           // or once this many file records wait; 0: 100
	FlushSoon      time.Duration // or this long after the last flush once a file started, moved on or ended; 0: 100 ms
	ProgressEvery  time.Duration // the least time between two PROGRESS events of a task; 0: 5 s
	Backoff        time.Duration // first retry delay of a file or of a run that failed; 0: 1 s
	Logger         *slog.Logger
	Now            func() time.Time // the clock for leases and records; nil: time.Now
	Engine         CopyFunc         // nil: engine.Copy
	EngineMany     CopyManyFunc     // nil: engine.CopyMany

	once    sync.Once
	wake    chan struct{}
	mu      sync.Mutex
	running map[string]*run // by task ID; nil while the run starts
	stats   stats           // for Collector
}

func (w *Worker) init() {
	w.once.Do(func() { w.wake, w.running = make(chan struct{}, 1), map[string]*run{} })
}

// Wake makes an idle Serve look for work now, e.g. after a submission.
func (w *Worker) Wake() {
	w.init()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Serve claims and runs tasks until ctx ends, then stops the running ones
// (see the package comment) and returns nil once they are released.
func (w *Worker) Serve(ctx context.Context) error {
	if w.Store == nil || w.Box == nil || w.Ops == nil || w.ID == "" {
		return errors.New("worker: Store, Box, Ops and ID are required")
	}
	w.init()
	slots := make(chan struct{}, orInt(w.Tasks, 16))
	var wg sync.WaitGroup
	defer wg.Wait()
	if signals, err := w.Store.Watch(ctx); err != nil {
		w.log().Warn("watch the store: running tasks see cancels at their next heartbeat", "err", err)
	} else {
		wg.Go(func() {
			for id := range signals {
				w.poke(id)
			}
		})
	}
	// Tasks this worker held when its process died: at once, not after
	// their leases lapse.
	now := w.now()
	mine, err := w.Store.Reclaim(ctx, w.ID, now, w.lease())
	if err != nil && ctx.Err() == nil {
		w.log().Error("reclaim", "err", err)
	}
	for _, t := range mine {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		w.log().Info("task taken back after a restart", "task", t.ID)
		if !w.launch(ctx, &wg, slots, t, now) {
			<-slots
		}
	}
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		now := w.now()
		t, err := w.Store.Claim(ctx, w.ID, now, w.lease(), w.PerUser)
		if err == nil && w.launch(ctx, &wg, slots, t, now) {
			continue
		}
		<-slots
		if err != nil && !domain.IsNotFound(err) && ctx.Err() == nil {
			w.log().Error("claim", "err", err)
		}
		idle.Reset(orDuration(w.Poll, time.Second))
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-idle.C:
		}
	}
}

// launch runs the claimed task t in the slot taken from slots, unless it
// already runs here.
func (w *Worker) launch(ctx context.Context, wg *sync.WaitGroup, slots chan struct{}, t domain.Task, now time.Time) bool {
	if !w.start(t.ID, now) {
		return false
	}
	wg.Go(func() {
		defer w.Wake() // a queued task may claim the slot at once
		defer func() { <-slots }()
		defer w.end(t.ID)
		w.runTask(ctx, t, now)
	})
	return true
}

// start marks a task claimed at now running; false if it already runs
// here: its lease lapsed (heartbeats failed) and this worker claimed it
// again, which only renewed the lease of the run that goes on, or let it
// end.
func (w *Worker) start(id string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.running[id]; ok {
		if r != nil {
			r.renewed(now)
		}
		return false
	}
	w.running[id] = nil
	return true
}

// started makes r the run of its task, for poke.
func (w *Worker) started(r *run) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[r.task.ID] = r
}

// poke makes the run of task id (every run, for "") look at its task at
// once, as a heartbeat does: a signal from the store.
func (w *Worker) poke(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for tid, r := range w.running {
		if r != nil && (id == "" || id == tid) {
			r.poke()
		}
	}
}

func (w *Worker) end(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.running, id)
}

func (w *Worker) lease() time.Duration { return orDuration(w.Lease, time.Minute) }

func (w *Worker) heartbeatEvery() time.Duration { return orDuration(w.HeartbeatEvery, w.lease()/3) }

func (w *Worker) backoff() time.Duration { return orDuration(w.Backoff, time.Second) }

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) log() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (w *Worker) copy() CopyFunc {
	if w.Engine != nil {
		return w.Engine
	}
	return engine.Copy
}

func (w *Worker) copyMany() CopyManyFunc {
	if w.EngineMany != nil {
		return w.EngineMany
	}
	return engine.CopyMany
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func orInt(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
