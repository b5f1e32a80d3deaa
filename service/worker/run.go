package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/internal/fault"
	"ferry/internal/plural"
	"ferry/internal/synclevel"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/secret"
)

// Causes that stop a run early.
var (
	errCanceled  = errors.New("canceled by the user")
	errLeaseLost = errors.New("lease lost")
	errRestart   = errors.New("the deadline changed") // stops one attempt, not the run
)

// pause is a cause that turns the task INACTIVE until its user activates
// an endpoint again.
type pause struct {
	nice, why string
	endpoint  string // whose activation to look at again once paused; "": none
}

func (p *pause) Error() string { return p.why }

// ending is how a run leaves its task.
type ending struct {
	status, nice string // status "": the lease is lost, the task is another worker's
	fatal        *domain.FatalError
	event        domain.Event
	recheck      string // endpoint whose activation may have come back meanwhile
}

func failed(code, why string) ending {
	return ending{status: domain.StatusFailed, fatal: &domain.FatalError{Code: code, Description: why},
		event: domain.Event{Code: domain.EventFailed, Description: why, IsError: true}}
}

func paused(p *pause) ending {
	return ending{status: domain.StatusInactive, nice: p.nice, recheck: p.endpoint,
		event: domain.Event{Code: domain.EventInactive, Description: p.why, IsError: true}}
}

var canceled = ending{status: domain.StatusFailed,
	fatal: &domain.FatalError{Code: "CANCELED", Description: errCanceled.Error()},
	event: domain.Event{Code: domain.EventCanceled, Description: errCanceled.Error()}}

func deadlinePassed(why string) ending {
	e := failed("DEADLINE", "the deadline passed before every file was done"+why)
	e.event.Code = domain.EventDeadline
	return e
}

// maxTries bounds the tries of a task without a deadline whose runs fail
// as a whole (an endpoint that does not answer); with a deadline, tries go
// on until it.
const maxTries = 5

// run is one claim of a task, until it ends, pauses or the lease is lost.
type run struct {
	w    *Worker
	log  *slog.Logger
	p    *progress
	stop context.CancelCauseFunc
	user domain.User
	eps  []domain.Endpoint // the source (or the delete task's endpoint), then the destination
	// relays are the endpoints through which alone destinations are
	// reached (domain.Endpoint.Via), by ID.
	relays map[string]domain.Endpoint

	task    domain.Task // as claimed
	resumed bool        // an earlier claim ran the task: the destination may hold partial files
	copies  int         // engine runs so far

	pokes chan struct{} // look at the task now (poke)
	again chan struct{} // an endpoint changed: try again now, not after the backoff

	mu       sync.Mutex
	leased   time.Time               // the lease's last renewal (claim, heartbeat, claimed again here)
	deadline time.Time               // the task's, as heartbeats return it
	restart  context.CancelCauseFunc // stops the current attempt
	moved    bool                    // an endpoint changed: read them again before the next attempt
	expiry   *time.Timer             // when the first credential expires
	cancels  engine.Cancels          // files the user canceled, for the engine runs
}

// runTask runs a task claimed at now.
func (w *Worker) runTask(ctx context.Context, t domain.Task, now time.Time) {
	r := &run{w: w, task: t, deadline: t.Deadline, p: newProgress(w, t), log: w.log().With("task", t.ID),
		resumed: t.StartTime.Before(now.Add(-time.Millisecond)), // the store keeps microseconds
		pokes:   make(chan struct{}, 1), again: make(chan struct{}, 1), leased: now}
	w.started(r)
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r.stop = stop
	r.log.Info("task claimed", "type", t.Type, "status", t.Status)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.heartbeats(rctx) }()
	go func() { defer wg.Done(); r.p.flusher(rctx, stop) }()
	e := r.execute(rctx)
	stop(nil)
	wg.Wait()
	r.arm(rctx, time.Time{})
	r.finish(ctx, e)
}

// execute does the task's work and says how it ends.
func (r *run) execute(ctx context.Context) ending {
	t := r.task
	if t.CancelRequested {
		return canceled
	}
	var err error
	if r.user, err = r.w.Store.UserByID(ctx, t.UserID); err != nil {
		return r.trouble(ctx, "load user", err)
	}
	if e, ok := r.loadEndpoints(ctx); !ok {
		return e
	}
	logins, err := r.logins(ctx)
	var pz *pause
	if errors.As(err, &pz) {
		return paused(pz)
	}
	if err != nil {
		return r.trouble(ctx, "load activations", err)
	}
	if pz := r.watchAgents(ctx); pz != nil {
		return paused(pz)
	}
	if r.task.Items, err = r.w.Store.TaskItems(ctx, t.ID); err != nil {
		return r.trouble(ctx, "load items", err)
	}
	if err := r.loadRecords(ctx); err != nil {
		return r.trouble(ctx, "load file records", err)
	}
	switch t.Type {
	case domain.TypeTransfer:
		if r.resumed {
			r.p.resumed()
		}
		return r.attempts(ctx, func(ctx context.Context, try int, deadline time.Time) error {
			return r.transfer(ctx, try, deadline, logins)
		})
	case domain.TypeDelete:
		return r.attempts(ctx, func(ctx context.Context, _ int, _ time.Time) error { return r.delete(ctx, logins[0]) })
	}
	return failed("FAILED", fmt.Sprintf("unknown task type %q", t.Type))
}

// loadEndpoints reads the run's endpoints: the source (or the delete
// task's endpoint), then the destination. false: the run ends so — FAILED
// when one is gone or its owner made it private and it is not the task
// user's (domain.Endpoint.UsableBy): it runs at the start of every claim
// of the task and again whenever one of them changes, so a task does not
// outlive its user's right to an endpoint, whether it waited (INACTIVE,
// queued) or ran when the right went.
func (r *run) loadEndpoints(ctx context.Context) (ending, bool) {
	t := r.task
	ids := []string{t.SrcEndpoint}
	if t.Type == domain.TypeTransfer {
		ids = t.Endpoints()
	}
	var eps []domain.Endpoint
	relays := map[string]domain.Endpoint{}
	for i, id := range ids {
		ep, e, ok := r.loadEndpoint(ctx, id, "")
		if !ok {
			return e, false
		}
		if ep.Via != "" && i == 0 {
			what := "be a transfer's source"
			if t.Type == domain.TypeDelete {
				what = "delete"
			}
			return failed("FAILED", domain.ErrorMessage(ep.ViaError(what))), false
		}
		if _, seen := relays[ep.Via]; ep.Via != "" && !seen {
			relay, e, ok := r.loadEndpoint(ctx, ep.Via, ep.DisplayName())
			if !ok {
				return e, false
			}
			if relay.Via != "" {
				return failed("FAILED", fmt.Sprintf("endpoint %s's head node %s is itself reached only through %s", ep.DisplayName(),
					relay.DisplayName(), relay.ViaName)), false
			}
			relays[relay.ID] = relay
		}
		eps = append(eps, ep)
	}
	r.mu.Lock()
	r.eps, r.relays = eps, relays
	r.mu.Unlock()
	return ending{}, true
}

// loadEndpoint reads endpoint id of the run, or the head node of the
// endpoint behind (a name; "": none); false: the run ends so.
func (r *run) loadEndpoint(ctx context.Context, id, behind string) (domain.Endpoint, ending, bool) {
	ep, err := r.w.Store.Endpoint(ctx, id)
	what := "endpoint " + id
	if behind != "" {
		what = fmt.Sprintf("endpoint %s's head node %s", behind, id)
	}
	if domain.IsNotFound(err) {
		return ep, failed("ENDPOINT_NOT_FOUND", what+" no longer exists"), false
	}
	if err != nil {
		return ep, r.trouble(ctx, "load endpoint", err), false
	}
	if behind != "" {
		what = fmt.Sprintf("endpoint %s's head node %s", behind, ep.DisplayName())
	} else {
		what = "endpoint " + ep.DisplayName()
	}
	if !ep.UsableBy(r.task.UserID) {
		return ep, failed(domain.NicePermissionDenied, what+" is no longer shared: only its owner may use it now, "+
			"so the task stops"), false
	}
	return ep, ending{}, true
}

// relaysOf are the run's relays, in a stable order.
func (r *run) relaysOf() []domain.Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.relays))
	slices.SortFunc(out, func(a, b domain.Endpoint) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// endpointsChanged reports whether an endpoint of the run (or a relay)
// now has other servers, another way to log in, another owner or
// visibility, or another relay, or is gone.
func (r *run) endpointsChanged(ctx context.Context) bool {
	r.mu.Lock()
	eps := slices.Clone(r.eps)
	r.mu.Unlock()
	for _, ep := range append(eps, r.relaysOf()...) {
		now, err := r.w.Store.Endpoint(ctx, ep.ID)
		if domain.IsNotFound(err) {
			return true
		}
		if err == nil && (!slices.Equal(now.Servers, ep.Servers) || now.Auth != ep.Auth ||
			now.OwnerID != ep.OwnerID || now.Public != ep.Public || now.Via != ep.Via) {
			return true
		}
	}
	return false
}

// trouble ends a run that the store failed: the lease lapses, and the task
// is tried again after it, by this worker or another.
func (r *run) trouble(ctx context.Context, what string, err error) ending {
	if e, ok := r.stopped(ctx); ok {
		return e
	}
	r.log.Error(what, "err", err)
	return ending{}
}

// stopped reports whether the run was stopped, and how it then ends.
func (r *run) stopped(ctx context.Context) (ending, bool) {
	if ctx.Err() == nil {
		return ending{}, false
	}
	cause := context.Cause(ctx)
	var pz *pause
	switch {
	case errors.Is(cause, errCanceled):
		return canceled, true
	case errors.As(cause, &pz):
		return paused(pz), true
	case errors.Is(cause, errLeaseLost):
		return ending{}, true
	}
	// The worker is stopping: the task goes back to the queue.
	return ending{status: domain.StatusActive, nice: domain.NiceQueued, event: domain.Event{Code: domain.EventQueued,
		Description: fmt.Sprintf("worker %s stopped; the task waits for the next worker", r.w.ID)}}, true
}

// logins opens the credentials of the run's endpoints (none for anonymous
// ones) and arms the timer of the first expiry, counting the relays'
// (whose logins transferMany opens). A missing or expired activation is
// a *pause.
func (r *run) logins(ctx context.Context) ([]domain.Login, error) {
	var out []domain.Login
	var first time.Time
	r.mu.Lock()
	eps := slices.Clone(r.eps)
	r.mu.Unlock()
	for i, ep := range append(eps, r.relaysOf()...) {
		l, expires, err := r.login(ctx, ep)
		if err != nil {
			return nil, err
		}
		if !expires.IsZero() && (first.IsZero() || expires.Before(first)) {
			first = expires
		}
		if i < len(eps) {
			out = append(out, l)
		}
	}
	r.arm(ctx, first)
	return out, nil
}

// login opens the task user's credential for ep and says when it expires;
// a missing, expired or unreadable one pauses the task.
func (r *run) login(ctx context.Context, ep domain.Endpoint) (domain.Login, time.Time, error) {
	l, expires, err := r.w.Box.Login(ctx, r.w.Store, r.task.UserID, ep, r.w.now())
	if ie, ok := errors.AsType[*secret.InactiveError](err); ok {
		return l, expires, &pause{nice: ie.Nice, endpoint: ep.ID, why: ie.Message + " to resume the task"}
	}
	return l, expires, err
}

// watchAgents returns a pause when the agent of a connect endpoint of the
// run is away, and else pauses the run when one goes away.
func (r *run) watchAgents(ctx context.Context) *pause {
	for _, ep := range r.eps {
		if ep.Auth != domain.AuthConnect {
			continue
		}
		away := &pause{nice: domain.NiceEndpointOffline, endpoint: ep.ID,
			why: fmt.Sprintf("endpoint %s's agent is not connected; the task resumes when it is", ep.DisplayName())}
		gone, ok := r.agentOnline(ctx, ep)
		if !ok {
			return away
		}
		go func() {
			select {
			case <-gone:
				r.stop(away)
			case <-ctx.Done():
			}
		}()
	}
	return nil
}

// agentOnline asks the relay whether ep's agent is connected, watching
// it until ctx ends.
func (r *run) agentOnline(ctx context.Context, ep domain.Endpoint) (gone <-chan struct{}, ok bool) {
	if r.w.Agents == nil {
		return nil, false
	}
	return r.w.Agents.Online(ctx, ep.ID)
}

// arm sets the expiry timer to at (zero: none). When it fires the
// activations are read again: renewed ones re-arm it, expired ones pause
// the task.
func (r *run) arm(ctx context.Context, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expiry != nil {
		r.expiry.Stop()
		r.expiry = nil
	}
	if !at.IsZero() && ctx.Err() == nil {
		r.expiry = time.AfterFunc(at.Sub(r.w.now()), func() { r.checkLogins(ctx) })
	}
}

// checkLogins pauses the run when a credential expired or was removed.
func (r *run) checkLogins(ctx context.Context) {
	_, err := r.logins(ctx)
	var pz *pause
	switch {
	case errors.As(err, &pz):
		r.stop(pz)
	case err != nil && ctx.Err() == nil:
		r.log.Warn("check activations", "err", err)
	}
}

// loadRecords reads what earlier runs recorded that the run keeps: how
// many files were skipped for source errors, and the partial records.
// The paths recorded, in any state, are left out (skip asks the store,
// directory by directory): files recorded FAILED failed for good (the
// engine retried them); files the user canceled are recorded CANCELED
// once.
func (r *run) loadRecords(ctx context.Context) error {
	id := r.task.ID
	var err error
	for marker := int64(0); ; {
		var files []domain.File
		files, marker, err = r.w.Store.Files(ctx, id, domain.FileSkippedError, marker, 1000)
		if err != nil {
			return err
		}
		r.p.skippedErrors(len(files))
		if marker == 0 {
			break
		}
	}
	for marker := int64(0); ; {
		var partials []domain.Partial
		partials, marker, err = r.w.Store.Partials(ctx, id, marker, 1000)
		if err != nil {
			return err
		}
		r.p.loadPartials(partials)
		if marker == 0 {
			break
		}
	}
	if len(r.task.Destinations) > 0 {
		if err := r.loadDests(ctx); err != nil {
			return err
		}
	}
	return r.loadCanceled(ctx)
}

// loadCanceled reads the files the user canceled; those canceled since
// the last look go to the running engine, which stops them at once.
func (r *run) loadCanceled(ctx context.Context) error {
	names, err := r.w.Store.CanceledFiles(ctx, r.task.ID)
	if err != nil {
		return err
	}
	for _, n := range r.p.cancel(names) {
		r.cancels.Cancel(n)
	}
	return nil
}

// poke makes the heartbeats look at the task now.
func (r *run) poke() {
	select {
	case r.pokes <- struct{}{}:
	default:
	}
}

// heartbeats keep the lease and watch the task, every HeartbeatEvery and
// whenever the store signals it: a requested cancel, a new deadline,
// canceled files and the activations. A lease not renewed until a quarter
// of it is left stops the run (errLeaseLost): once it lapses another
// worker may take the task, and two runs would write the same temporary
// files.
func (r *run) heartbeats(ctx context.Context) {
	t := time.NewTicker(r.w.heartbeatEvery())
	defer t.Stop()
	fence := time.NewTimer(r.leaseLeft())
	defer fence.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.pokes:
		case <-fence.C:
			if left := r.leaseLeft(); left > 0 {
				fence.Reset(left)
				continue
			}
			r.log.Warn("lease not renewed: the run stops before another worker may take the task", "lease", r.w.lease())
			r.stop(errLeaseLost)
			return
		}
		if !r.beat(ctx) {
			return
		}
	}
}

// leaseLeft is how long the run may go on without renewing its lease: to
// a quarter of the lease before it lapses (a margin for the clocks of the
// workers and the store).
func (r *run) leaseLeft() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leased.Add(r.w.lease() * 3 / 4).Sub(r.w.now())
}

// renewed notes that the lease was renewed at now.
func (r *run) renewed(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.After(r.leased) {
		r.leased = now
	}
}

// beat renews the lease and acts on what changed; false when the run
// must stop.
func (r *run) beat(ctx context.Context) bool {
	now := r.w.now()
	task, err := r.w.Store.Heartbeat(ctx, r.task.ID, r.w.ID, now, r.w.lease())
	if err == nil {
		r.renewed(now)
	}
	switch {
	case domain.IsNotFound(err):
		r.stop(errLeaseLost)
		return false
	case err != nil:
		if ctx.Err() == nil {
			r.log.Warn("heartbeat", "err", err)
		}
		return true
	case task.CancelRequested:
		r.stop(errCanceled)
		return false
	}
	moved := r.endpointsChanged(ctx)
	r.mu.Lock()
	if !task.Deadline.Equal(r.deadline) || moved {
		r.deadline = task.Deadline
		r.moved = r.moved || moved
		if r.restart != nil {
			r.restart(errRestart)
		}
	}
	r.mu.Unlock()
	if moved {
		select {
		case r.again <- struct{}{}:
		default:
		}
	}
	if err := r.loadCanceled(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("load canceled files", "err", err)
	}
	r.checkLogins(ctx)
	return true
}

// attempts runs work until it succeeds, retrying runs that failed as a
// whole (an endpoint that does not answer) with backoff until the deadline
// (or maxTries without one), and says how the task ends. The backoff
// starts again when an endpoint that did not answer answers again.
func (r *run) attempts(ctx context.Context, work func(ctx context.Context, try int, deadline time.Time) error) ending {
	wait := fault.Backoff{Base: r.w.backoff()}
	down := false // the last run failed for an endpoint that did not answer
	for try := 0; ; try++ {
		r.mu.Lock()
		deadline, moved := r.deadline, r.moved
		r.moved = false
		actx, restart := context.WithCancelCause(ctx)
		r.restart = restart
		r.mu.Unlock()
		if moved {
			if e, ok := r.loadEndpoints(ctx); !ok {
				restart(nil)
				return e
			}
		}
		var cancel context.CancelFunc = func() {}
		if !deadline.IsZero() {
			actx, cancel = context.WithDeadline(actx, deadline)
		}
		err := work(actx, try, deadline)
		restarted := errors.Is(context.Cause(actx), errRestart)
		// Only the task's deadline ends a context by time here; the engine's
		// own context for it may end a moment before actx.
		late := errors.Is(actx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
		cancel()
		restart(nil)
		if e, ok := r.stopped(ctx); ok {
			return e
		}
		switch {
		case restarted:
			continue
		case err == nil:
			return r.result(!deadline.IsZero())
		case late:
			return deadlinePassed("")
		}
		if fault.IsFatal(err) {
			return r.full(err)
		}
		f := classify(err)
		if f.code == domain.NiceCredentialExpired {
			return paused(&pause{nice: f.code,
				why: fmt.Sprintf("an endpoint refused the credential (%s); activate it again to resume", gridops.Tell(err))})
		}
		if down && !fault.Unanswered(err) {
			wait.Reset()
		}
		down = fault.Unanswered(err)
		delay := wait.Next()
		last := deadline.IsZero() && try+1 >= maxTries || !deadline.IsZero() && r.w.now().Add(delay).After(deadline)
		if !f.transient || last {
			return failed(f.code, gridops.Tell(err))
		}
		r.p.fault(domain.EventConnectFailed, "", err, delay)
		select {
		case <-ctx.Done():
			e, _ := r.stopped(ctx)
			return e
		case <-time.After(delay):
		case <-r.again:
		}
	}
}

// full is how a run ends whose destination is full or over quota: it
// pauses until someone frees space, or fails at once when the task was
// submitted with fail_on_quota_errors.
func (r *run) full(err error) ending {
	full := "the destination " + r.eps[len(r.eps)-1].DisplayName()
	if len(r.eps) > 2 {
		full = "a destination"
	}
	if r.task.Options.FailOnQuotaErrors {
		return failed(domain.NiceNoSpace, fmt.Sprintf("%s is full or over its quota (%s); the task fails at once, "+
			"as it was submitted with fail_on_quota_errors", full, gridops.Tell(err)))
	}
	return paused(&pause{nice: domain.NiceNoSpace, why: fmt.Sprintf("%s is full (%s); free space there, "+
		"then resume the task (ferry task resume %s)", full, gridops.Tell(err), r.task.ID)})
}

// transfer runs the engine once over the items not yet done, on the
// try-th server of each endpoint (in turn, when servers fail).
func (r *run) transfer(ctx context.Context, try int, deadline time.Time, logins []domain.Login) error {
	if len(r.task.Destinations) == 0 && r.eps[1].Via != "" {
		// One destination behind a relay: the way of several, with one
		// (engine.CopyMany, through the relay), recording its files
		// there as the task's.
		r.task.Destinations = []domain.Destination{{Endpoint: r.task.DstEndpoint}}
		if err := r.loadDests(ctx); err != nil {
			return err
		}
	}
	if len(r.task.Destinations) > 0 {
		return r.transferMany(ctx, try, deadline, logins)
	}
	var ends [2]engine.Endpoint
	for i, ep := range r.eps {
		servers, err := gridops.Servers(ep, r.w.Agents, r.w.Networks)
		if err != nil {
			return err
		}
		if ends[i], err = gridops.Engine(ep, servers[try%len(servers)], logins[i], r.w.Trust); err != nil {
			return err
		}
		ends[i].Servers = gridops.Others(servers, try)
	}
	r.p.begin()
	var items []engine.Item
	for _, it := range r.task.Items {
		if !r.p.skip(ctx, it.Src, it.Dst) {
			items = append(items, engine.Item{Src: it.Src, Dst: it.Dst, Recursive: it.Recursive})
		}
	}
	if len(items) == 0 {
		return nil
	}
	unsure := r.resumed || r.copies > 0
	r.copies++
	_, err := r.w.copy()(ctx, ends[0], ends[1], items, r.options(ctx, deadline, unsure), r.p)
	if ie, ok := errors.AsType[*engine.ItemError](err); ok {
		return gridops.ItemErr(ie, r.eps[0], r.eps[1])
	}
	return err
}

// options are the engine's options for the task, whose Skip asks the
// store under ctx. When unsure, the
// destination may hold files of an interrupted run: whole ones, not
// recorded done before it stopped, are compared by checksum and not sent
// again; partial ones, which look complete to the sync levels exists,
// size and mtime, are compared by checksum too, and resume from what the
// earlier run recorded of them.
func (r *run) options(ctx context.Context, deadline time.Time, unsure bool) engine.Options {
	o := r.task.Options
	level := o.SyncLevel
	if unsure && level != synclevel.None {
		level = synclevel.Checksum
	}
	tar, err := engine.ParseTarMode(o.Tar)
	if err != nil {
		tar = engine.TarAuto // the API admits only valid modes
	}
	eo := engine.Options{
		Tar:           tar,
		Compress:      o.Compress,
		Resume:        unsure,
		Restart:       r.p.restartOf,
		SyncLevel:     level,
		Verify:        o.VerifyChecksum,
		Encrypt:       o.EncryptData,
		Algorithm:     o.ChecksumAlgorithm,
		PreserveMtime: o.PreserveTimestamp,
		Deadline:      deadline,
		Backoff:       r.w.backoff(),
		Skip:          func(src, dst string) bool { return r.p.skip(ctx, src, dst) },
		DeleteExtra:   o.DeleteDestinationExtra,
		Cancels:       &r.cancels,

		SkipSourceErrors: o.SkipSourceErrors,
	}
	for _, f := range o.FilterRules {
		eo.Filters = append(eo.Filters, engine.Filter{Exclude: f.Method == "exclude", Name: f.Name, Type: f.Type})
	}
	return eo
}

// delete deletes the items not yet done; a failure to reach the endpoint
// stops it for another try.
func (r *run) delete(ctx context.Context, l domain.Login) error {
	for _, it := range r.task.Items {
		if r.p.skip(ctx, it.Src, "") {
			continue
		}
		err := r.w.Ops.Delete(ctx, r.eps[0], l, it.Src, it.Recursive, r.p.removed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fault.ShouldRetry(err) {
			return err
		}
		r.p.deleted(it.Src, err, r.task.Options.IgnoreMissing)
	}
	return nil
}

// result ends a run whose work is done: SUCCEEDED unless a file failed.
// With a deadline (timed) the engine retries files until it: a file that
// failed on the way, not for its path, failed because the deadline came.
func (r *run) result(timed bool) ending {
	c := r.p.counters()
	if c.FilesFailed == 0 {
		skipped := fmt.Sprint(c.FilesSkipped)
		if n := r.p.skippedErrs(); n > 0 {
			skipped += fmt.Sprintf(" (%d for source errors: ferry task show --skipped-errors %s)", n, r.task.ID)
		}
		why := fmt.Sprintf("%s: %d transferred, %s skipped; %s", plural.Count(c.Files, "file"), c.FilesTransferred, skipped, plural.Bytes(c.BytesTransferred))
		if r.task.Type == domain.TypeDelete {
			why = c.DeleteSummary()
		}
		return ending{status: domain.StatusSucceeded, event: domain.Event{Code: domain.EventSucceeded, Description: why}}
	}
	first, f := r.p.firstFailure()
	why := fmt.Sprintf("%d of %s failed", c.FilesFailed, plural.Count(c.Files, "file"))
	if r.task.Type == domain.TypeDelete {
		why = fmt.Sprintf("%d of %s failed", c.FilesFailed, plural.Count(c.Paths(), "path"))
	}
	if first != "" {
		why += "; the first: " + first
	}
	if timed && f.transient {
		return deadlinePassed(": " + why)
	}
	return failed(orString(f.code, "FAILED"), why)
}

// failure is what an error means for a task.
type failure struct {
	code      string // fatal error code, event code or nice status
	transient bool   // worth another try (fault.ShouldRetry)
}

// codes names the domain's error codes a user acts on, for a task's fatal
// error or nice status; other codes are FAILED.
var codes = map[string]string{
	domain.ENotFound:     domain.NiceFileNotFound,
	domain.EForbidden:    domain.NicePermissionDenied,
	domain.EUnavailable:  domain.NiceConnectFailed,
	domain.ETimeout:      domain.NiceConnectFailed,
	domain.EUnauthorized: domain.NiceCredentialExpired,
}

// classify says what err, from the engine or from FileOps, means: whether
// to retry, the fault says (internal/fault); its name, the domain's code
// of it.
func classify(err error) failure {
	f := failure{code: "FAILED", transient: fault.ShouldRetry(err)}
	var de *domain.Error
	var ge *gridftp.Error
	switch {
	case fault.IsFatal(err):
		f.code = domain.NiceNoSpace
	case engine.Mismatch(err):
		f.code = domain.NiceChecksumMismatch
	case errors.As(err, &de):
		f.code = orString(codes[de.Code], f.code)
	case errors.As(err, &ge):
		f.code = orString(codes[domain.ErrorCode(gridops.Err("", "", err))], f.code)
	case fault.Unanswered(err):
		f.code = domain.NiceConnectFailed
	}
	return f
}

// finish persists what is left and the ending, and notifies the user.
func (r *run) finish(parent context.Context, e ending) {
	if e.status == "" {
		// What the run finished reaches the store unless another worker
		// holds the task by now (the store refuses the flush then).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), r.w.lease()/4)
		defer cancel()
		r.p.flush(ctx)
		r.log.Info("task left to its lease")
		return
	}
	r.p.endFaults()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), time.Minute)
	defer cancel()
	if e.status == domain.StatusSucceeded {
		// A cancel asked for while the last files finished wins: the user
		// was told the task is being canceled.
		if t, err := r.w.Store.TaskByID(ctx, r.task.ID); err == nil && t.CancelRequested {
			e = canceled
		}
	}
	// The flush that follows a database outage adds its event: a second
	// one stores it.
	for range 2 {
		if err := r.stored(parent, "persist progress", r.p.flush); domain.IsNotFound(err) {
			r.log.Info("lease lost")
			return
		} else if err != nil {
			return // the worker stops: the task is taken back after a restart
		}
	}
	now := r.w.now()
	e.event.Time = now
	events := []domain.Event{e.event}
	if e.status == domain.StatusFailed {
		if left, ok := r.p.leftPartial(); ok {
			events = append([]domain.Event{left}, events...)
		}
	}
	if err := r.stored(parent, "set status", func(ctx context.Context) error {
		return r.w.Store.SetStatus(ctx, r.task.ID, r.w.ID, e.status, e.nice, e.fatal, now, events)
	}); err != nil {
		r.log.Warn("set status", "status", e.status, "err", err)
		return
	}
	r.log.Info("task "+e.status, "nice", e.nice, "why", e.event.Description)
	if e.recheck != "" {
		r.recheck(ctx, e.nice, e.recheck)
	}
	r.notify(ctx, e.status, e.nice)
}

// stored runs write until the store takes it: while the database is
// unreachable it tries again, waiting as fault.Backoff says from 1 s up
// to storeWait, so that what the run did is not lost with its end. It
// gives up on a lost lease, or when the worker stops (parent ends): then
// the task goes on after a restart, from what was stored.
func (r *run) stored(parent context.Context, what string, write func(context.Context) error) error {
	b := fault.Backoff{Base: time.Second, Max: storeWait}
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), time.Minute)
		err := write(ctx)
		cancel()
		if err == nil || domain.IsNotFound(err) {
			return err
		}
		delay := b.Next()
		r.log.Warn(what+"; trying again", "in", delay, "err", err)
		select {
		case <-parent.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// storeWait bounds the wait between two tries of a write the database
// did not take.
const storeWait = 30 * time.Second

// recheck turns a task paused with the nice status ACTIVE again when what
// the endpoint lacked came back while it was pausing: the activation's own
// Reactivate, or the relay's ResumeEndpoint when an agent connects, may
// have run before the task was INACTIVE.
func (r *run) recheck(ctx context.Context, nice, endpointID string) {
	i := slices.IndexFunc(r.eps, func(ep domain.Endpoint) bool { return ep.ID == endpointID })
	if i < 0 {
		return
	}
	ep := r.eps[i]
	var err error
	if nice == domain.NiceEndpointOffline {
		now, cancel := context.WithCancel(ctx) // whether it is connected now
		_, ok := r.agentOnline(now, ep)
		cancel()
		if ok {
			_, err = r.w.Store.ResumeEndpoint(ctx, ep.ID, nice, r.w.now())
		}
	} else if _, _, lerr := r.login(ctx, ep); lerr == nil {
		_, err = r.w.Store.Reactivate(ctx, r.task.UserID, ep.ID, r.w.now())
	}
	if err != nil {
		r.log.Warn("resume", "err", err)
	}
}

// notify tells the user, when the task asks for it.
func (r *run) notify(ctx context.Context, status, nice string) {
	o := r.task.Options
	want := status == domain.StatusSucceeded && o.NotifyOnSucceeded ||
		status == domain.StatusFailed && o.NotifyOnFailed ||
		status == domain.StatusInactive && o.NotifyOnInactive
	if !want || r.w.Notify == nil {
		return
	}
	t, err := r.w.Store.TaskByID(ctx, r.task.ID)
	// The notice is of this ending, whatever the task is by now (a user
	// may have resumed it already).
	t.Status, t.NiceStatus = status, nice
	if err == nil {
		err = r.w.Notify.Notify(ctx, r.user, t)
	}
	if err != nil {
		r.log.Warn("notify", "status", status, "err", err)
	}
}

func orString(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
