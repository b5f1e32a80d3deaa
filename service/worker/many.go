package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"ferry/engine"
	"ferry/internal/fault"
	"ferry/internal/plural"
	"ferry/service/domain"
	"ferry/service/gridops"
)

// A task with several destinations runs engine.CopyMany. Its progress
// keeps, besides the task's own records, each source file's record at
// each destination: a file that arrives at a destination is recorded
// there at once (engine.Arrivals), so that a run after a crash tells the
// engine what each destination has (engine.Target.Has) and each resumes
// where it stood. A source file is recorded done for the task once it is
// at every destination; failures are recorded once the engine has
// finished both passes.

// destRec is what the worker knows of one source file at one destination.
type destRec struct {
	state string // domain.FileSucceeded or FileSkipped: it is there
	dst   string
}

// manyState is the part of a progress that a task with several
// destinations adds. Guarded by progress.mu.
type manyState struct {
	ctx      context.Context      // the task's run, for the store's records (everywhere)
	names    []string             // the destinations' display names
	at       []map[string]destRec // by destination: source files there
	hits     map[string]bool      // recorded before this run and met again in it
	recorded map[string]bool      // recorded for the task in this run
	planned  int                  // files the tree pass plans to send
	failed   []destFail           // failures at destinations, until the run ends
	lost     []engine.FileResult  // source files not at every destination, until the run ends
}

// destFail is a file that did not arrive at destination dest.
type destFail struct {
	dest int
	r    engine.FileResult
}

// loadDests reads what earlier runs recorded at each destination, and
// records for the task the files that are at every destination without a
// record of their own (a run stopped between the two).
func (r *run) loadDests(ctx context.Context) error {
	n := len(r.task.Destinations)
	names := make([]string, n)
	for i := range names {
		names[i] = r.eps[1+i].DisplayName()
	}
	var all []domain.DestFile
	for marker := int64(0); ; {
		files, next, err := r.w.Store.DestFiles(ctx, r.task.ID, -1, "", marker, 1000)
		if err != nil {
			return err
		}
		all = append(all, files...)
		if marker = next; marker == 0 {
			break
		}
	}
	r.p.loadDests(ctx, names, all)
	return nil
}

func (p *progress) loadDests(ctx context.Context, names []string, files []domain.DestFile) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := &manyState{ctx: ctx, names: names, at: make([]map[string]destRec, len(names))}
	for i := range m.at {
		m.at[i] = map[string]destRec{}
	}
	p.many = m
	p.beginMany()
	for _, f := range files {
		if f.Dest < len(m.at) && (f.State == domain.FileSucceeded || f.State == domain.FileSkipped) {
			m.at[f.Dest][f.Src] = destRec{state: f.State, dst: f.Dst}
		}
	}
	for src := range m.at[0] {
		p.everywhere(src, 0)
	}
}

// beginMany starts counting a run. Called with p.mu held.
func (p *progress) beginMany() {
	m := p.many
	m.hits, m.recorded, m.planned, m.failed, m.lost = map[string]bool{}, map[string]bool{}, 0, nil, nil
}

// has is destination dest's engine.Target.Has.
func (p *progress) has(dest int) func(src string) bool {
	return func(src string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, ok := p.many.at[dest][src]
		return ok
	}
}

// transferMany runs engine.CopyMany once over the items not yet done at
// every destination, on the try-th server of each endpoint.
func (r *run) transferMany(ctx context.Context, try int, deadline time.Time, logins []domain.Login) error {
	ends := make([]engine.Endpoint, len(r.eps))
	vias := make([]*engine.Endpoint, len(r.eps))
	for i, ep := range r.eps {
		if ep.Via != "" {
			e, via, err := r.relayed(ctx, ep, try, logins[i])
			if err != nil {
				return err
			}
			ends[i], vias[i] = e, via
			continue
		}
		servers, err := gridops.Servers(ep, r.w.Agents, r.w.Networks)
		if err != nil {
			return err
		}
		if ends[i], err = gridops.Engine(ep, servers[try%len(servers)], logins[i], r.w.Trust); err != nil {
			return err
		}
	}
	r.p.begin()
	var keep []int
	for i, it := range r.task.Items {
		if !r.p.skipMany(ctx, it.Src, it.Dst) {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	targets := make([]engine.Target, len(r.task.Destinations))
	for d, dest := range r.task.Destinations {
		items := dest.DestItems(r.task.Items)
		t := engine.Target{Endpoint: ends[1+d], Via: vias[1+d], Has: r.p.has(d)}
		for _, i := range keep {
			t.Items = append(t.Items, engine.Item{Src: items[i].Src, Dst: items[i].Dst, Recursive: items[i].Recursive})
		}
		targets[d] = t
	}
	unsure := r.resumed || r.copies > 0
	r.copies++
	o := r.options(ctx, deadline, unsure)
	o.Skip = func(src, dst string) bool { return r.p.skipMany(ctx, src, dst) }
	r.p.event(domain.Event{Code: domain.EventStarted, Description: fmt.Sprintf("to %d destinations: %s", len(targets), strings.Join(r.p.destNames(), ", ")),
		Details: details(map[string]any{"destinations": r.p.destNames()})})
	res, err := r.w.copyMany()(ctx, ends[0], targets, o, &manyReporter{r.p})
	if ie, ok := errors.AsType[*engine.ItemError](err); ok {
		return gridops.ItemErr(ie, r.eps[0], r.eps[1])
	}
	return r.p.settle(res, err)
}

// relayed is how the engine reaches ep, a destination behind a relay,
// on the try-th server of each: ep's address as the relay sees it, and
// the relay's server with the user's login there (Target.Via).
func (r *run) relayed(ctx context.Context, ep domain.Endpoint, try int, l domain.Login) (engine.Endpoint, *engine.Endpoint, error) {
	e, err := gridops.Relayed(ep, try, l)
	if err != nil {
		return e, nil, err
	}
	r.mu.Lock()
	relay, ok := r.relays[ep.Via]
	r.mu.Unlock()
	if !ok {
		return e, nil, fmt.Errorf("endpoint %s: its head node was not loaded", ep.DisplayName())
	}
	servers, err := gridops.Servers(relay, r.w.Agents, r.w.Networks)
	if err != nil {
		return e, nil, err
	}
	rl, _, err := r.login(ctx, relay)
	if err != nil {
		return e, nil, err
	}
	via, err := gridops.Engine(relay, servers[try%len(servers)], rl, r.w.Trust)
	if err != nil {
		return e, nil, err
	}
	return e, &via, nil
}

// destNames are the destinations' display names.
func (p *progress) destNames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.many.names
}

// skipMany is the engine's Options.Skip for several destinations: as
// skip, but a file recorded before the run counts once however many
// passes meet it.
func (p *progress) skipMany(ctx context.Context, src, dst string) bool {
	if !p.recorded(ctx, src, dst) {
		return p.skip(ctx, src, dst) // a canceled file: recorded once
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.many
	if !m.recorded[src] && !m.hits[src] {
		m.hits[src] = true
		p.countFiles()
	}
	return true
}

// countFiles sets the task's Files counter for several destinations: the
// files recorded before the run, and the files the tree plans to send or
// those recorded in the run, whichever are more (the tree does not plan
// the files its head has). Called with p.mu held.
func (p *progress) countFiles() {
	m := p.many
	if !p.planned {
		return
	}
	want := int64(len(m.hits) + max(m.planned, len(m.recorded)))
	if want != p.total.Files {
		p.add(domain.Counters{Files: want - p.total.Files}, nil, nil)
	}
}

// everywhere records src for the task if it is at every destination
// and not recorded yet; size is its size. Called with p.mu held.
func (p *progress) everywhere(src string, size int64) {
	m := p.many
	if p.pending[recKey(src, m.at[0][src].dst)] || m.recorded[src] {
		return
	}
	// Recorded before: by an earlier run, or by this one and stored. Not
	// known (the store does not answer): recorded by the next run's
	// loadDests.
	if known, err := p.known.has(m.ctx, src, m.at[0][src].dst); known || err != nil {
		return
	}
	sent := false
	for _, at := range m.at {
		rec, ok := at[src]
		if !ok {
			return
		}
		sent = sent || rec.state == domain.FileSucceeded
	}
	f := domain.File{Src: src, Dst: m.at[0][src].dst, Size: size, State: domain.FileSkipped}
	d := domain.Counters{FilesSkipped: 1}
	if sent {
		f.State, d = domain.FileSucceeded, domain.Counters{FilesTransferred: 1}
	}
	m.recorded[src] = true
	p.add(d, &f, nil)
	p.countFiles()
}

// settle ends a run of the engine: the failures at destinations become
// records and events, and the files not at every destination fail for the
// task — unless the run was stopped (the next one tries them again) or a
// destination failed as a whole for a reason worth another try, which it
// returns for the run to be tried again.
func (p *progress) settle(res engine.MultiResult, err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.many
	failed, lost := m.failed, m.lost
	m.failed, m.lost = nil, nil
	if err != nil {
		return err
	}
	var again error
	for i, d := range res.Dests {
		if d.Err == nil || i >= len(m.names) {
			continue
		}
		p.add(domain.Counters{}, nil, &domain.Event{Code: domain.EventDestinationFailed, IsError: true,
			Description: fmt.Sprintf("destination %s: %s (%s did not arrive)", m.names[i], gridops.Tell(d.Err), plural.Count(d.Failed, "file")),
			Details:     details(map[string]any{"destination": i, "endpoint": m.names[i], "files_failed": d.Failed})})
		if again == nil && fault.ShouldRetry(d.Err) {
			again = fmt.Errorf("destination %s: %w", m.names[i], d.Err)
		}
	}
	for _, f := range failed {
		r := f.r
		p.destFiles = append(p.destFiles, domain.DestFile{Dest: f.dest, Src: r.Src, Dst: r.Dst, Size: r.Size,
			State: domain.FileFailed, Error: fmt.Sprint(r.Err), Time: p.w.now()})
		if res.Dests[f.dest].Err != nil {
			continue // told once, above
		}
		if p.failure == "" {
			p.failure, p.class = fmt.Sprintf("%s at %s: %v", r.Src, m.names[f.dest], r.Err), classify(r.Err)
		}
		p.add(domain.Counters{}, nil, &domain.Event{Code: domain.EventFileFailed, IsError: true,
			Description: fmt.Sprintf("%s at %s: %s (after %s)", r.Src, m.names[f.dest], gridops.Tell(r.Err), plural.Count(r.Attempts, "attempt")),
			Details:     details(map[string]any{"destination": f.dest, "endpoint": m.names[f.dest]})})
	}
	if again != nil {
		return again
	}
	for _, r := range lost {
		if p.failure == "" {
			p.failure, p.class = r.Src+": "+fmt.Sprint(r.Err), classify(r.Err)
		}
		f := domain.File{Src: r.Src, Dst: r.Dst, Size: r.Size, State: domain.FileFailed, Error: fmt.Sprint(r.Err)}
		m.recorded[r.Src] = true
		p.add(domain.Counters{FilesFailed: 1}, &f, nil)
		p.countFiles()
	}
	return nil
}

// manyReporter is the engine.Reporter of a run to several destinations.
type manyReporter struct{ p *progress }

var (
	_ engine.DestReporter = (*manyReporter)(nil)
	_ engine.Arrivals     = (*manyReporter)(nil)
	_ engine.Deleter      = (*manyReporter)(nil)
)

// Deleted records a path deleted at one of the destinations.
func (mr *manyReporter) Deleted(d engine.Deletion) { mr.p.Deleted(d) }

// Planned counts the bytes to move as a single copy does; the files the
// tree plans count toward the task's files (countFiles).
func (mr *manyReporter) Planned(files int, bytes int64) {
	p := mr.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d := domain.Counters{BytesTotal: bytes}
	if !p.planned {
		p.planned = true
		d.BytesTotal += p.total.BytesTransferred - p.total.BytesTotal
	}
	p.many.planned += files
	p.add(d, nil, nil)
	p.countFiles()
}

func (mr *manyReporter) Progress(n int64) { mr.p.Progress(n) }

func (mr *manyReporter) Fault(path string, err error, retryIn time.Duration) {
	mr.p.Fault(path, err, retryIn)
}

// Arrived records src at destination dest, and for the task once it is
// at every destination.
func (mr *manyReporter) Arrived(dest int, r engine.FileResult) {
	p := mr.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.many
	if dest >= len(m.at) {
		return
	}
	if _, ok := m.at[dest][r.Src]; ok {
		return
	}
	state := domain.FileSucceeded
	if r.Outcome == engine.Skipped {
		state = domain.FileSkipped
	}
	m.at[dest][r.Src] = destRec{state: state, dst: r.Dst}
	p.destFiles = append(p.destFiles, domain.DestFile{Dest: dest, Src: r.Src, Dst: r.Dst, Size: r.Size, State: state, Time: p.w.now()})
	p.kickIf()
	p.everywhere(r.Src, r.Size)
}

// DestDone keeps a failure at a destination until the run ends (settle);
// what arrived was recorded as it arrived.
func (mr *manyReporter) DestDone(dest int, r engine.FileResult) {
	switch r.Outcome {
	case engine.Transferred, engine.Skipped:
		mr.Arrived(dest, r)
	case engine.Failed:
		p := mr.p
		p.mu.Lock()
		p.many.failed = append(p.many.failed, destFail{dest: dest, r: r})
		p.mu.Unlock()
	}
}

// Done takes a source file's outcome over every destination: one that
// arrived everywhere is recorded already; one that failed somewhere
// waits for the end of the run (settle).
func (mr *manyReporter) Done(r engine.FileResult) {
	p := mr.p
	switch r.Outcome {
	case engine.Failed:
		p.mu.Lock()
		p.many.lost = append(p.many.lost, r)
		p.mu.Unlock()
	case engine.Canceled:
		p.mu.Lock()
		recorded := p.many.recorded[r.Src]
		p.many.recorded[r.Src] = true
		p.mu.Unlock()
		if !recorded {
			p.Done(r)
		}
	}
}
