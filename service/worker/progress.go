package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/internal/fault"
	"ferry/internal/plural"
	"ferry/service/domain"
	"ferry/service/gridops"
)

// progress is the engine.Reporter of one run of a task. It keeps counter
// deltas, file records and events until flush persists them in one
// Store.Progress call, and it says which source paths the run leaves out
// (skip): those with a record, stored (known) or not yet (pending), and
// those the user canceled. Nothing it holds grows with the files done:
// once maxWaiting records wait for a flush, the engine's calls that make
// more wait for one (waitRoom).
type progress struct {
	w      *Worker
	taskID string
	kick   chan struct{} // FlushFiles records wait
	soon   chan struct{} // a file started, moved on or ended: flush within FlushSoon

	mu       sync.Mutex
	room     sync.Cond       // on mu: a flush took records, or flushes ended
	ended    bool            // flushes ended (the flusher returned): no one waits for room
	total    domain.Counters // the task's counters, unflushed ones included
	delta    domain.Counters // not yet flushed, but those of files
	files    []domain.File
	tied     []domain.Counters // of each of files, stored with it
	moving   map[string]int64  // bytes of each file in delta (FileProgress)
	counted  map[string]int64  // bytes of each unfinished file in total, its partial record's "counted"
	events   []domain.Event
	known    *recorded       // the stored records, a window of them
	pending  map[string]bool // files (recKey) whose records are not yet stored
	canceled map[string]bool // source paths the user canceled; true once recorded by this run
	planned  bool            // Planned was called in the current engine run
	hits     int64           // paths left out before Planned
	failure  string          // the first file failure of this run, for the fatal error
	class    failure         // what it means
	skipped  int             // files recorded FileSkippedError, by this run and earlier ones
	resume   string          // what earlier runs did, for the next STARTED event (resumed)

	lastEvent time.Time // of the last PROGRESS event
	lastBytes int64     // total.BytesTransferred then
	storeOut  time.Time // when a flush first failed, until one succeeds: the database was out

	// Partials: what earlier runs knew of files they did not finish
	// (restart), which files have a record stored or being stored
	// (stored), the last the engine said of each file it has not
	// finished (last), and the records to put or delete at the next flush
	// (partials). A file that ends before its record was flushed never
	// reaches the store; one of a tar stream's members only started waits
	// a flush interval first (nothing of it is counted before it ends), so
	// that the members, which end within it, write nothing.
	restart  map[string]engine.Partial
	stored   map[string]bool
	last     map[string]engine.Partial
	partials map[string]partialRec

	faults map[string]*faultGroup // by code and cause

	many      *manyState        // a task with several destinations (many.go); nil: one
	destFiles []domain.DestFile // per-destination records not yet flushed
	deletions []domain.Deletion // paths deleted at a destination, not yet flushed
	untold    int               // the last deletions, not yet in a DELETED event
	storing   int               // records of the flush under way
}

func newProgress(w *Worker, t domain.Task) *progress {
	p := &progress{w: w, taskID: t.ID, kick: make(chan struct{}, 1), soon: make(chan struct{}, 1), total: t.Counters,
		known: newRecorded(w.Store, t.ID), pending: map[string]bool{}, canceled: map[string]bool{},
		lastEvent: w.now(), lastBytes: t.BytesTransferred,
		restart: map[string]engine.Partial{}, stored: map[string]bool{}, last: map[string]engine.Partial{}, partials: map[string]partialRec{},
		moving: map[string]int64{}, counted: map[string]int64{},
		faults: map[string]*faultGroup{}}
	p.room.L = &p.mu
	return p
}

// loadPartials takes in the partial records of earlier runs. What the
// task's counters hold of each file becomes what its record's ranges
// have, in the flush that stores the record again to say so, as the
// engine does for an attempt that fails: the bytes counted beyond them
// (of chunks not yet whole when the run stopped) go again and count then,
// and those that arrived ahead of their count (a restart marker before
// the byte count) count now.
func (p *progress) loadPartials(ps []domain.Partial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d int64
	for _, r := range ps {
		p.stored[r.Src] = true
		pt, counted, err := decodePartial(r.State)
		if err != nil {
			continue
		}
		p.restart[r.Src] = pt
		have := pt.Have.Total()
		p.counted[r.Src] = have
		if counted != have {
			d += have - counted
			p.partials[r.Src] = partialRec{pt: pt}
		}
	}
	if d != 0 {
		p.add(domain.Counters{BytesTransferred: d}, nil, nil)
		p.lastBytes = p.total.BytesTransferred
	}
}

// restartOf is the engine's Options.Restart.
func (p *progress) restartOf(src string) (engine.Partial, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt, ok := p.restart[src]
	return pt, ok
}

// Partial keeps what the engine knows of a file it has not finished, for
// a flush soon: a file it started, and the ranges at the destination.
func (p *progress) Partial(src string, pt engine.Partial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[src] = pt
	r := partialRec{pt: pt}
	if pt.Member && pt.Have.Empty() {
		if r.started = p.partials[src].started; r.started.IsZero() {
			r.started = p.w.now()
		}
	} else {
		p.flushSoon()
	}
	p.partials[src] = r
}

// partialRec is a partial record to put, or, gone, to delete; started is
// when a tar member's record, only started, was first reported (a flush
// then holds it a while), zero for others.
type partialRec struct {
	pt      engine.Partial
	gone    bool
	started time.Time
}

// record is the partial record r of src as a flush stores it, with the
// bytes of the file the flush's counters hold. Called with p.mu held.
func (p *progress) record(src string, r partialRec) domain.Partial {
	if r.gone {
		return domain.Partial{Src: src}
	}
	return domain.Partial{Src: src, State: encodePartial(r.pt, p.counted[src]), Size: r.pt.Size, Have: r.pt.Have.Total()}
}

// flushSoon asks for a flush within FlushSoon. Called with p.mu held.
func (p *progress) flushSoon() {
	select {
	case p.soon <- struct{}{}:
	default:
	}
}

// encodePartial is a partial record's State: "SIZE MTIME [RANGES]
// counted=N", the time in Unix nanoseconds, no ranges for a file only
// started, and N the bytes of the file that the task's counters stored
// with the record hold.
func encodePartial(pt engine.Partial, counted int64) string {
	return strings.Join(strings.Fields(fmt.Sprintf("%d %d %s counted=%d", pt.Size, pt.Modify.UnixNano(), pt.Have, counted)), " ")
}

// decodePartial reads encodePartial's State; a record without counted=
// (one stored before records had it) counts its ranges.
func decodePartial(s string) (engine.Partial, int64, error) {
	var pt engine.Partial
	f := strings.Fields(s)
	var counted int64 = -1
	var err0 error
	if n := len(f); n > 0 && strings.HasPrefix(f[n-1], "counted=") {
		counted, err0 = strconv.ParseInt(strings.TrimPrefix(f[n-1], "counted="), 10, 64)
		f = f[:n-1]
	}
	if len(f) != 2 && len(f) != 3 {
		return pt, 0, fmt.Errorf("partial record %q: want SIZE MTIME [RANGES] counted=N", s)
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	ns, err2 := strconv.ParseInt(f[1], 10, 64)
	var have gridftp.Ranges
	var err3 error
	if len(f) == 3 {
		have, err3 = gridftp.ParseRanges(f[2])
	}
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return pt, 0, fmt.Errorf("partial record %q: %w", s, err)
	}
	if counted < 0 {
		counted = have.Total()
	}
	return engine.Partial{Size: size, Modify: time.Unix(0, ns).UTC(), Have: have}, counted, nil
}

// add records a counter delta, a file record and an event (each optional),
// and asks for a flush when enough records wait. The delta of a record
// is stored with it, in the same flush. Called with p.mu held.
func (p *progress) add(d domain.Counters, f *domain.File, e *domain.Event) {
	p.total.Add(d)
	if f == nil {
		p.delta.Add(d)
	}
	if f != nil {
		f.TaskID, f.Time = p.taskID, p.w.now()
		p.files = append(p.files, *f)
		p.tied = append(p.tied, d)
		p.flushSoon()
		p.pending[recKey(f.Src, f.Dst)] = true
		p.known.add(f.Src, f.Dst)
		// The file is final: its partial record goes, or never comes.
		if p.stored[f.Src] {
			p.partials[f.Src] = partialRec{gone: true}
			delete(p.stored, f.Src)
		} else {
			delete(p.partials, f.Src)
		}
		delete(p.last, f.Src)
		delete(p.counted, f.Src)
		p.kickIf()
	}
	if e != nil {
		p.tellDeleted()
		e.Time = p.w.now()
		p.events = append(p.events, *e)
	}
}

// waiting is how many records wait for a flush. Called with p.mu held.
func (p *progress) waiting() int { return len(p.files) + len(p.destFiles) + len(p.deletions) }

// held is how many records the run holds that the store does not have:
// waiting, and being stored.
func (p *progress) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting() + p.storing
}

// kickIf asks for a flush when enough records wait. Called with p.mu held.
func (p *progress) kickIf() {
	if p.waiting() >= orInt(p.w.FlushFiles, 100) {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// maxWaiting bounds the records that wait for a flush: transfers faster
// than the store can record them wait for it (waitRoom), rather than the
// worker keep a record of every file done until the store catches up —
// hundreds of MiB on a task of a million small files. Four batches keep
// the flusher busy.
const maxWaiting = 4 * maxBatchFiles

// waitRoom holds the caller, the engine having just made a record, while
// maxWaiting records wait for a flush, until a flush takes some or
// flushes end; it counts the waits for the worker's metrics. It is the
// last thing its callers do: the wait lets go of p.mu. Called with p.mu
// held.
func (p *progress) waitRoom() {
	if p.waiting() < maxWaiting || p.ended {
		return
	}
	p.w.stats.recordWaits.Add(1)
	for p.waiting() >= maxWaiting && !p.ended {
		p.room.Wait()
	}
}

// event records an event on its own.
func (p *progress) event(e domain.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(domain.Counters{}, nil, &e)
}

// cancel adds source paths the user canceled, each recorded CANCELED
// when met unless it has a record. It returns those it did not know.
func (p *progress) cancel(paths []string) (fresh []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range paths {
		if _, ok := p.canceled[s]; !ok {
			p.canceled[s] = false
			fresh = append(fresh, s)
		}
	}
	return fresh
}

// begin starts counting an engine run: the files it finds replace those
// that earlier runs found and did not finish, and the records it meets
// are read afresh.
func (p *progress) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planned, p.hits = false, 0
	p.known.clear()
	if p.many != nil {
		p.beginMany()
	}
}

// skip is the engine's Options.Skip (with the run's ctx): it leaves out
// paths recorded before or during the run, and records a file canceled
// by the user once.
func (p *progress) skip(ctx context.Context, src, dst string) bool {
	recorded := p.recorded(ctx, src, dst)
	p.mu.Lock()
	defer p.mu.Unlock()
	canceled, ok := p.canceled[src]
	if !recorded && !ok {
		return false
	}
	var d domain.Counters
	if p.planned {
		d.Files = 1
	} else {
		p.hits++
	}
	if !recorded && !canceled {
		p.canceled[src] = true
		p.add(d, &domain.File{Src: src, Dst: dst, State: domain.FileCanceled},
			&domain.Event{Code: domain.EventFileCanceled, Description: src + ": canceled by the user"})
		p.waitRoom()
		return true
	}
	p.add(d, nil, nil)
	return true
}

// recKey is what pending knows a file by: its source and its destination
// (one source may go to several).
func recKey(src, dst string) string { return src + "\x00" + dst }

// recorded says whether src going to dst has a record, stored or waiting
// for a flush.
// While the store does not answer it tries again, waiting as
// fault.Backoff says, until ctx ends (false then: the run is over).
func (p *progress) recorded(ctx context.Context, src, dst string) bool {
	p.mu.Lock()
	pending := p.pending[recKey(src, dst)]
	p.mu.Unlock()
	if pending {
		return true
	}
	b := fault.Backoff{Base: p.w.backoff(), Max: storeWait}
	for {
		ok, err := p.known.has(ctx, src, dst)
		if err == nil || ctx.Err() != nil {
			return ok
		}
		delay := b.Next()
		p.w.log().Warn("read file records; trying again", "task", p.taskID, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

// Planned counts the files found and the bytes to move; the first call of
// an engine run also counts the paths left out before it and takes back
// what earlier runs counted, and the bytes they moved become part of the
// total.
func (p *progress) Planned(files int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := domain.Counters{Files: int64(files), BytesTotal: bytes}
	if !p.planned {
		p.planned = true
		d.Files += p.hits - p.total.Files
		d.BytesTotal += p.total.BytesTransferred - p.total.BytesTotal
	}
	p.add(d, nil, nil)
}

// Walked sets the directories counter: every run walks the whole tree
// again, so its count replaces what earlier runs counted.
func (p *progress) Walked(dirs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(domain.Counters{Directories: int64(dirs) - p.total.Directories}, nil, nil)
}

// Progress counts bytes moved.
func (p *progress) Progress(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(domain.Counters{BytesTransferred: n}, nil, nil)
}

// FileProgress is Progress of the bytes of the file src, which its record
// takes with it if they are not stored before it ends; until then its
// partial record, stored with them, says how many the counters hold.
func (p *progress) FileProgress(src string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(domain.Counters{BytesTransferred: n}, nil, nil)
	p.moving[src] += n
	p.counted[src] += n
}

// Fault counts a failure of one file that the engine retries.
func (p *progress) Fault(path string, err error, retryIn time.Duration) {
	p.fault(domain.EventFault, path, err, retryIn)
}

// fault counts a failure of path ("" for the run as a whole) that is
// retried after retryIn. Faults of one cause make one event: a server
// that is down fails every file queued for it, and the task's history
// says so once, with a count (see faultGroup). The worker's metrics count
// it by what it means (classify).
func (p *progress) fault(code, path string, err error, retryIn time.Duration) {
	p.w.stats.fault(classify(err).code)
	what := gridops.Tell(err)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(domain.Counters{Faults: 1}, nil, nil)
	cause := what
	if path != "" {
		base, _, _ := strings.Cut(path, " [") // a chunk's name: "path [off+n]"
		cause = strings.ReplaceAll(strings.ReplaceAll(what, path, "…"), base, "…")
	}
	key := code + "\x00" + cause
	g := p.faults[key]
	now := p.w.now()
	if g == nil {
		g = &faultGroup{code: code, what: what, path: path, first: now}
		p.faults[key] = g
	}
	g.n++
	g.last, g.retryIn = now, retryIn
}

// faultGroup is the faults of one cause (the error, without the file it
// hit) not yet told. It becomes an event once the cause has been quiet for
// faultQuiet, after faultWindow at most, or when the run ends.
type faultGroup struct {
	code, what, path string // the first fault's
	first, last      time.Time
	n                int
	retryIn          time.Duration
}

const (
	faultQuiet  = 2 * time.Second
	faultWindow = 30 * time.Second
)

// tellFaults turns the fault groups due at now (all, with all) into
// events. Called with p.mu held.
func (p *progress) tellFaults(now time.Time, all bool) {
	for key, g := range p.faults {
		if !all && now.Sub(g.last) < faultQuiet && now.Sub(g.first) < faultWindow {
			continue
		}
		delete(p.faults, key)
		what := g.what
		if g.path != "" {
			what = g.path + ": " + g.what
		}
		d := map[string]any{"retry_in_ms": g.retryIn.Milliseconds(), "count": g.n}
		if g.n > 1 {
			what = fmt.Sprintf("%s (and %d more like it over %s)", what, g.n-1, g.last.Sub(g.first).Round(time.Millisecond))
			d["first_time"], d["last_time"] = g.first, g.last
		}
		p.events = append(p.events, domain.Event{Code: g.code, IsError: true, Time: g.first, Details: details(d),
			Description: fmt.Sprintf("%s; retrying in %s", what, g.retryIn.Round(time.Millisecond))})
	}
}

// endFaults tells every fault not yet told, as the run ends.
func (p *progress) endFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tellFaults(p.w.now(), true)
}

// Done records a file's outcome. A file transferred counts its size once,
// whatever earlier runs, engine runs and attempts sent of it: the bytes
// the counters hold of it (counted: its record's ranges, as an earlier
// run left them, and what this run reported) come to its size, those
// sent twice taken back and those moved uncounted (an earlier run's
// beyond its record, a tar member's, found whole) counted now. A file
// whole at the destination that the task moved before (a record of an
// earlier run, or bytes counted by this one) is transferred, not
// skipped; the bytes counted of one skipped are taken back.
func (p *progress) Done(r engine.FileResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := domain.File{Src: r.Src, Dst: r.Dst, Size: r.Size}
	moving := p.moving[r.Src]
	delete(p.moving, r.Src)
	counted := p.counted[r.Src]
	pt, ok := p.restart[r.Src]
	ours := ok && pt.Size == r.Size || !ok && counted > 0
	if ok && pt.Size == r.Size {
		delete(p.restart, r.Src)
	}
	if r.Outcome == engine.Skipped && ours {
		p.add(domain.Counters{Files: 1}, nil, nil) // not in the plan
		r.Outcome = engine.Transferred
	}
	switch r.Outcome {
	case engine.Transferred:
		f.State = domain.FileSucceeded
		uncounted := r.Size - counted - r.Unreported
		d := domain.Counters{FilesTransferred: 1, BytesTransferred: uncounted + r.Unreported, BytesTotal: uncounted}
		if alg, sum, ok := strings.Cut(r.Checksum, ":"); ok {
			f.Algorithm, f.Checksum, d.BytesChecksummed = alg, sum, r.Size
		}
		p.add(d, &f, nil)
		// The bytes of it this run reported and did not store yet are
		// stored with its record: stored without it, a crash would leave
		// them counted and the file to count again.
		if m := min(moving, p.delta.BytesTransferred); m > 0 {
			p.delta.BytesTransferred -= m
			p.tied[len(p.tied)-1].BytesTransferred += m
		}
	case engine.Skipped:
		// What an earlier run counted of another file by that name goes.
		f.State = domain.FileSkipped
		p.add(domain.Counters{Files: 1, FilesSkipped: 1, BytesTransferred: -counted, BytesTotal: -counted}, &f, nil)
	case engine.SkippedError:
		// Its bytes, if any, came back through Progress.
		f.State, f.Error = domain.FileSkippedError, gridops.Tell(r.Err)
		p.skipped++
		p.add(domain.Counters{FilesSkipped: 1, BytesTotal: -r.Size}, &f, &domain.Event{Code: domain.EventSkippedError, IsError: true,
			Description: fmt.Sprintf("%s: %s; skipped, as the task skips source errors", r.Src, f.Error)})
	case engine.Canceled:
		// Its bytes came back through Progress; it is no longer expected.
		f.State = domain.FileCanceled
		p.add(domain.Counters{BytesTotal: -r.Size}, &f, &domain.Event{Code: domain.EventFileCanceled,
			Description: r.Src + ": canceled by the user"})
	default:
		p.fileFailed(f, r.Err, domain.Counters{}, r.Attempts)
	}
	p.waitRoom()
}

// Deleted records a path the engine deleted at a destination because the
// source does not have it, stored with the next flush. The deletions not
// yet told make DELETED events before the next other event, or at the
// next flush (tellDeleted): the history keeps the order of what happened.
func (p *progress) Deleted(d engine.Deletion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletions = append(p.deletions, domain.Deletion{Dest: d.Dest, Path: d.Path, Dir: d.Dir, Size: d.Size, Time: p.w.now()})
	p.untold++
	p.kickIf()
	p.waitRoom()
}

// tellDeleted turns the deletions not yet told into DELETED events: one
// for each destination and at most maxBatchFiles paths, listing every path
// in its details (a directory's with a trailing slash), the first few in
// its description. Called with p.mu held.
func (p *progress) tellDeleted() {
	ds := p.deletions[len(p.deletions)-p.untold:]
	p.untold = 0
	for len(ds) > 0 {
		dest := ds[0].Dest
		var paths []string
		for len(ds) > 0 && ds[0].Dest == dest && len(paths) < maxBatchFiles {
			paths = append(paths, shownPath(ds[0]))
			ds = ds[1:]
		}
		desc := fmt.Sprintf("deleted %s at the destination that the source does not have: %s",
			plural.Count(len(paths), "path"), strings.Join(paths[:min(len(paths), 3)], ", "))
		if len(paths) > 3 {
			desc += fmt.Sprintf(" and %d more", len(paths)-3)
		}
		d := map[string]any{"paths": paths}
		if p.many != nil {
			d["destination"] = dest
		}
		p.events = append(p.events, domain.Event{Code: domain.EventDeleted, Time: p.w.now(),
			Description: desc + " (ferry task show --deleted " + p.taskID + ")", Details: details(d)})
	}
}

// shownPath is a deletion's path as events show it: a directory's with a
// trailing slash.
func shownPath(d domain.Deletion) string {
	if d.Dir {
		return d.Path + "/"
	}
	return d.Path
}

// leftPartial is the event of a task that ends with files it started and
// did not finish, whose restart records the store keeps: it names the
// first few (ferry task show --partial lists them all).
func (p *progress) leftPartial() (domain.Event, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stored) == 0 {
		return domain.Event{}, false
	}
	paths := slices.Sorted(maps.Keys(p.stored))
	desc := fmt.Sprintf("left %s partial at the destination: %s", plural.Count(len(paths), "file"), strings.Join(paths[:min(len(paths), 3)], ", "))
	if len(paths) > 3 {
		desc += fmt.Sprintf(" and %d more", len(paths)-3)
	}
	desc += fmt.Sprintf(" (ferry task show --partial %s); ferry task resume %s names the transfer that finishes the job", p.taskID, p.taskID)
	return domain.Event{Code: domain.EventLeftPartial, IsError: true, Time: p.w.now(), Description: desc,
		Details: details(map[string]any{"files": len(paths)})}, true
}

// skippedErrors counts n files that earlier runs recorded
// FileSkippedError.
func (p *progress) skippedErrors(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skipped += n
}

// skippedErrs is how many files the task skipped for source errors.
func (p *progress) skippedErrs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.skipped
}

// removed counts a file or directory (dir) that a delete task removed,
// in its counters alone: a tree of millions of files keeps no record of
// each, only of each path the task was given (deleted).
func (p *progress) removed(dir bool) {
	d := domain.Counters{Files: 1}
	if dir {
		d = domain.Counters{Directories: 1}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(d, nil, nil)
}

// deleted records the outcome of deleting one path of a delete task.
func (p *progress) deleted(path string, err error, ignoreMissing bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, d := domain.File{Src: path}, domain.Counters{}
	switch {
	case err == nil:
		f.State, d.FilesTransferred = domain.FileSucceeded, 1
	case ignoreMissing && domain.IsNotFound(err):
		f.State, d.FilesSkipped = domain.FileSkipped, 1
	default:
		p.fileFailed(f, err, d, 1)
		p.waitRoom()
		return
	}
	p.add(d, &f, nil)
	p.waitRoom()
}

// fileFailed records a file that failed for good, with the counters d.
// Called with p.mu held.
func (p *progress) fileFailed(f domain.File, err error, d domain.Counters, attempts int) {
	f.State, f.Error = domain.FileFailed, gridops.Tell(err)
	if p.failure == "" {
		p.failure, p.class = f.Error, classify(err)
		if !strings.Contains(f.Error, f.Src) {
			p.failure = f.Src + ": " + f.Error
		}
	}
	d.FilesFailed++
	p.add(d, &f, &domain.Event{Code: domain.EventFileFailed, IsError: true,
		Description: fmt.Sprintf("%s: %s (after %s)", f.Src, f.Error, plural.Count(attempts, "attempt"))})
}

// Started records the settings the engine chose, in short lines: the
// settings, then why, a line for each reason, then how the data goes (tar
// streams, compression, data channel security). The first engine run of
// a run that resumes a task begins with what earlier runs did.
func (p *progress) Started(s engine.Settings) {
	lines := []string{fmt.Sprintf("concurrency %d, parallelism %d, pipelining %d", s.Concurrency, s.Parallelism, s.Pipelining)}
	if s.ChunkSize > 0 {
		lines[0] += ", chunks of " + plural.Bytes(s.ChunkSize)
	}
	p.mu.Lock()
	if p.resume != "" {
		lines = append([]string{p.resume}, lines...)
		p.resume = ""
	}
	p.mu.Unlock()
	if s.Why != "" {
		lines = append(lines, strings.Split(s.Why, "; ")...)
	}
	if s.TarReason != "" {
		tar := s.TarReason
		if s.Batches > 0 {
			tar += " (" + plural.Count(s.Batches, "batch") + ")"
		}
		lines = append(lines, tar)
	}
	switch {
	case s.Compressed:
		lines = append(lines, "compressed in flight (zstd)")
	case s.CompressNote != "":
		lines = append(lines, s.CompressNote)
	}
	switch {
	case s.Encrypted:
		lines = append(lines, "data channels authenticated and encrypted")
	case s.Authenticated:
		lines = append(lines, "data channels authenticated")
	}
	p.event(domain.Event{Code: domain.EventStarted, Description: strings.Join(lines, "\n"),
		Details: details(map[string]any{"concurrency": s.Concurrency, "parallelism": s.Parallelism,
			"pipelining": s.Pipelining, "chunk_size": s.ChunkSize, "checksum_algorithm": s.Algorithm,
			"rtt_ms": float64(s.RTT.Microseconds()) / 1000, "tar_batches": s.Batches, "tar_reason": s.TarReason, "compressed": s.Compressed,
			"authenticated": s.Authenticated, "encrypted": s.Encrypted, "why": s.Why})})
}

// resumed notes, for the next STARTED event, that the run resumes a task
// earlier runs stopped (a restart of the service, a lost worker, a
// pause): the files they finished, the bytes they moved, and the files
// they left partial, which go on from what reached the destination.
func (p *progress) resumed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.total
	p.resume = fmt.Sprintf("resumed where an earlier run stopped: %s done already, %s moved",
		plural.Count(t.FilesTransferred+t.FilesSkipped, "file"), plural.Bytes(t.BytesTransferred))
	if n := len(p.stored); n > 0 {
		p.resume += fmt.Sprintf("; partial at the destination: %s, sent on from what reached it", plural.Count(n, "file"))
	}
}

// Tuned records a change of the engine's optimizer.
func (p *progress) Tuned(from, to int, prev, cur float64) {
	p.event(domain.Event{Code: domain.EventTuned, Description: engine.TuneNote(from, to, prev, cur),
		Details: details(map[string]any{"from": from, "to": to, "bytes_per_second_before": int64(prev), "bytes_per_second": int64(cur)})})
}

// Way records how large files move, and why (engine.Ways).
func (p *progress) Way(w engine.Way, note string) {
	p.event(domain.Event{Code: domain.EventWay, Description: note,
		Details: details(map[string]any{"way": w.String()})})
}

var (
	_ engine.Ways     = (*progress)(nil)
	_ engine.Starter  = (*progress)(nil)
	_ engine.Tuner    = (*progress)(nil)
	_ engine.Walker   = (*progress)(nil)
	_ engine.Partials = (*progress)(nil)
	_ engine.Deleter  = (*progress)(nil)
)

// counters is the task's counters as this run knows them.
func (p *progress) counters() domain.Counters {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// firstFailure is the first file failure of the run and what it means.
func (p *progress) firstFailure() (string, failure) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure, p.class
}

// flush persists all that waits, with a PROGRESS event when one is due. On
// a failure other than a lost lease the batch waits for the next flush.
func (p *progress) flush(ctx context.Context) error { return p.flushing(ctx, true) }

// flushing is flush; unless all, the partial records of files only
// started within the flush interval wait for the next.
func (p *progress) flushing(ctx context.Context, all bool) error {
	p.mu.Lock()
	now := p.w.now()
	p.tellFaults(now, false)
	if moved := p.total.BytesTransferred - p.lastBytes; moved > 0 && now.Sub(p.lastEvent) >= orDuration(p.w.ProgressEvery, 5*time.Second) {
		rate := float64(moved) / now.Sub(p.lastEvent).Seconds()
		p.add(domain.Counters{}, nil, &domain.Event{Code: domain.EventProgress,
			Description: fmt.Sprintf("%s transferred, %s/s", plural.Bytes(p.total.BytesTransferred), plural.Bytes(int64(rate))),
			Details:     details(map[string]any{"bytes_transferred": p.total.BytesTransferred, "bytes_per_second": int64(rate)})})
		p.lastEvent, p.lastBytes = now, p.total.BytesTransferred
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		n := min(len(p.files), maxBatchFiles)
		nd := min(len(p.destFiles), maxBatchFiles)
		nx := min(len(p.deletions), maxBatchFiles)
		p.tellDeleted()
		untied, tied := p.delta, p.tied[:n:n]
		b := domain.Batch{Delta: untied, Files: p.files[:n:n], DestFiles: p.destFiles[:nd:nd], Deletions: p.deletions[:nx:nx], Events: p.events}
		for _, d := range tied {
			b.Delta.Add(d)
		}
		young := now.Add(-orDuration(p.w.FlushEvery, time.Second))
		// The partial record of a file whose record waits for a later
		// batch goes with it: deleted before, a crash between would leave
		// the file with neither.
		later := map[string]bool{}
		for _, f := range p.files[n:] {
			later[f.Src] = true
		}
		taken := map[string]partialRec{}
		for src, r := range p.partials {
			if !all && r.started.After(young) || r.gone && later[src] {
				continue
			}
			delete(p.partials, src)
			taken[src] = r
			if !r.gone {
				p.stored[src] = true
			}
		}
		// A file whose bytes moved since the last flush, its ranges the
		// same, has its record stored again: it says what they count.
		for src, n := range p.moving {
			pt, ok := p.last[src]
			if _, put := taken[src]; ok && !put && n != 0 && p.stored[src] {
				taken[src] = partialRec{pt: pt}
			}
		}
		clear(p.moving) // their bytes are in untied
		for src, r := range taken {
			b.Partials = append(b.Partials, p.record(src, r))
		}
		p.delta, p.files, p.tied, p.destFiles, p.deletions, p.events = domain.Counters{}, p.files[n:], p.tied[n:], p.destFiles[nd:], p.deletions[nx:], nil
		more := p.waiting() > 0
		p.storing = n + nd + nx
		p.room.Broadcast()
		p.mu.Unlock()
		if b.Delta == (domain.Counters{}) && len(b.Files) == 0 && len(b.DestFiles) == 0 && len(b.Deletions) == 0 && len(b.Events) == 0 && len(b.Partials) == 0 {
			return nil
		}
		err := p.w.Store.Progress(ctx, p.taskID, p.w.ID, b)
		p.mu.Lock()
		p.storing = 0
		p.mu.Unlock()
		if err != nil {
			if !domain.IsNotFound(err) {
				p.mu.Lock()
				if p.storeOut.IsZero() {
					p.storeOut = now
				}
				untied.Add(p.delta)
				p.delta, p.files, p.tied, p.events = untied, append(b.Files, p.files...), append(tied, p.tied...), append(b.Events, p.events...)
				p.destFiles, p.deletions = append(b.DestFiles, p.destFiles...), append(b.Deletions, p.deletions...)
				for src, r := range taken {
					if _, newer := p.partials[src]; !newer {
						p.partials[src] = r
					}
				}
				p.mu.Unlock()
			}
			return err
		}
		p.w.stats.moved(b.Delta)
		p.mu.Lock()
		for _, f := range b.Files {
			delete(p.pending, recKey(f.Src, f.Dst))
		}
		p.mu.Unlock()
		p.storeBack()
		if !more {
			return nil
		}
	}
}

// storeBack tells, once a flush succeeds after failures, how long the
// database was out: the run went on, keeping its records until then.
func (p *progress) storeBack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.storeOut.IsZero() {
		return
	}
	out := p.w.now().Sub(p.storeOut)
	p.add(domain.Counters{}, nil, &domain.Event{Code: domain.EventStoreOut, IsError: true,
		Description: fmt.Sprintf("the database was unreachable for %s; the task went on, and what it did meanwhile is recorded now",
			out.Round(time.Second)),
		Details: details(map[string]any{"since": p.storeOut, "seconds": out.Seconds()})})
	p.storeOut = time.Time{}
}

// maxBatchFiles bounds the file records of one Store.Progress call: a
// transaction holds SQLite's one write lock, and a run that records many
// files at once (a sync that skips a large tree) must not keep every
// other request of the service waiting.
const maxBatchFiles = 500

// flusher flushes every FlushEvery, whenever FlushFiles records wait, and
// FlushSoon after the last flush once a file started, moved on (restart
// ranges) or ended, until ctx ends; a lost lease stops the run. Those are
// what a crash must not lose: a file whole at the destination and recorded
// nowhere is not sent again, so its bytes would never count, and ranges
// not recorded go again. A flush under way when ctx ends goes on to its
// end: a write cut off while it commits may have committed, and the
// batch, put back for the run's last flush, would count twice.
func (p *progress) flusher(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(orDuration(p.w.FlushEvery, time.Second))
	defer t.Stop()
	defer p.endFlushes()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		case <-p.soon:
			select {
			case <-ctx.Done():
				return
			case <-p.kick: // enough records wait: at once
			case <-time.After(time.Until(last.Add(orDuration(p.w.FlushSoon, 100*time.Millisecond)))):
			}
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err := p.flushing(fctx, false)
		cancel()
		last = time.Now()
		switch {
		case domain.IsNotFound(err):
			stop(errLeaseLost)
			return
		case err != nil && ctx.Err() == nil:
			p.w.log().Warn("persist progress", "task", p.taskID, "err", err)
		}
	}
}

// endFlushes lets go of those that wait for room: the flusher returned,
// and the run's last flush takes what waits.
func (p *progress) endFlushes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	p.room.Broadcast()
}

// details renders event details as JSON.
func details(m map[string]any) string {
	b, _ := json.Marshal(m)
	return string(b)
}
