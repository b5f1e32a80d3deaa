package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/multicast"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
)

// A copy to many destinations (CopyMany) runs in two passes.
//
// The tree pass sends each file once, from the source to one destination
// (the head), whose server writes it and forwards it at once to the others
// through ferry's multicast layer (stack/forward): a chain or a tree of
// servers, each writing and passing blocks on as they come, each checking
// its children's copies by checksum. The engine checks the head's copy
// against the source as any copy does. A destination that a file did not
// reach is named in the head's reply; the tree leaves it out of the files
// that follow. Every copy in the tree is written under its temporary name
// (partname): the head's is renamed once whole and verified, as in any
// copy; the others' are renamed by the repair pass, each destination's in
// a round trip (land), so that none bears its final name before the
// head's copy was found equal to its source.
//
// The repair pass then brings every destination up to date with ordinary
// copies, all destinations at once: the files the tree did not deliver
// come from a verified copy (the head's) when there is one, and
// destinations the tree could not include (servers that cannot forward
// and would have to, servers that accept no connections) get the whole
// copy from the source, as do all of them when the head failed.

// Target is one destination of CopyMany: its endpoint and, for each item,
// where the item goes there (its Items' Src and Recursive must be the
// same for every target).
type Target struct {
	Endpoint Endpoint
	Items    []Item
	// Via, when set, is a server in front of this destination (a head
	// node before a cluster's private network): the engine, which cannot
	// reach the destination, sends to Via, whose multicast layer only
	// forwards, to Endpoint's address as Via sees it, and writes nothing.
	Via *Endpoint
	// Has, when set, reports a source file this destination got in an
	// earlier run (a resumed task): the tree leaves it out for that file,
	// the repair pass does not send it, and it counts as skipped there.
	Has func(src string) bool
}

// has reports whether target i got src in an earlier run.
func (m *multi) has(i int, src string) bool {
	return m.targets[i].Has != nil && m.targets[i].Has(src)
}

// DestResult is what one destination got.
type DestResult struct {
	Endpoint    string
	Delivered   int // files that arrived, by the tree or by repair
	Repaired    int // of Delivered, files that came in the repair pass
	Skipped     int // already there (the sync level)
	Failed      int
	FailedFiles []FileResult
	Err         error // the repair copy to it failed as a whole (unreachable, refused)
}

// MultiResult sums up CopyMany. Its Result counts each source file once:
// transferred when every destination has it, failed when one does not.
type MultiResult struct {
	Result
	Dests []DestResult
	Head  int // the destination the source sent to; -1: no tree
	// Fanout is the tree's fan-out for large files, FanoutSmall for small
	// ones (0 without a tree).
	Fanout, FanoutSmall int
}

// DestReporter is an optional interface of a CopyMany Reporter: DestDone
// gives a file's final outcome at one destination (its index among the
// targets), before the file's Done.
type DestReporter interface {
	DestDone(dest int, r FileResult)
}

// Arrivals is an optional interface of a CopyMany Reporter: Arrived
// tells, as soon as it is known, that a file is at one destination (r's
// Outcome Transferred, sent there by the tree or the repair pass, or
// Skipped, found there), so that a caller can record it before the run
// ends and a later run leave it out there (Target.Has). A file may arrive
// at one destination more than once; its final outcome is DestDone's.
type Arrivals interface {
	Arrived(dest int, r FileResult)
}

// arrived passes r on to rep's Arrived, if it has one.
func arrived(rep Reporter, dest int, r FileResult) {
	if a, ok := rep.(Arrivals); ok && (r.Outcome == Transferred || r.Outcome == Skipped) {
		a.Arrived(dest, r)
	}
}

// repairers are how many destinations the repair pass copies to at once.
const repairers = 4

// CopyMany copies items from src to every target: through a tree of
// forwarding servers where the destinations allow it, then repairing what
// did not arrive. Fanout in opts.Fanout, or chosen.
func CopyMany(ctx context.Context, src Endpoint, targets []Target, opts Options, rep Reporter) (MultiResult, error) {
	start := time.Now()
	if rep == nil {
		rep = nopReporter{}
	}
	m := &multi{src: src, targets: targets, opts: opts, rep: rep, head: -1,
		res: MultiResult{Head: -1, Dests: make([]DestResult, len(targets))}}
	if err := m.check(); err != nil {
		return m.res, err
	}
	for i, t := range targets {
		m.res.Dests[i].Endpoint = t.Endpoint.String()
	}
	if len(targets) == 1 && targets[0].Via == nil {
		r, err := Copy(ctx, src, targets[0].Endpoint, targets[0].Items, opts, &one{rep: rep})
		m.res.Result, m.res.Dests[0] = r, destOf(targets[0].Endpoint, r)
		return m.res, err
	}
	m.probe(ctx)
	m.files, m.byHead = map[string]*multiFile{}, map[string]string{}
	err := m.treePass(ctx)
	if ctx.Err() == nil {
		m.repairPass(ctx)
	}
	m.finish()
	slices.Sort(m.res.Partial)
	m.res.Partial = slices.Compact(m.res.Partial)
	m.res.Elapsed = time.Since(start)
	if err == nil {
		err = ctx.Err()
	}
	return m.res, err
}

// multi is one run of CopyMany.
type multi struct {
	src     Endpoint
	targets []Target
	opts    Options
	rep     Reporter
	probes  []probe
	head    int
	tree    []int // the other destinations in the tree, in tree order
	fan     *fanout
	// smallBelow is the size under which a file is small on the tree's
	// slowest hop (fanouts).
	smallBelow int64

	mu     sync.Mutex
	files  map[string]*multiFile // by source path
	order  []string
	byHead map[string]string // source paths by the head's paths
	res    MultiResult
	// whole: the tree pass ended with every file final at the head
	// (transferred or skipped), so that the head can be a repair source.
	whole bool
}

// multiFile is one source file's outcome at each destination.
type multiFile struct {
	size int64
	sum  string
	at   map[int]FileResult // final outcomes by destination
	dsts map[int]string     // where it goes at each destination
	// check are the destinations whose copy from the tree is suspect:
	// the repair pass compares it with the head's (synclevel.Checksum) and
	// sends it again only if it differs.
	check map[int]bool
	// landed are the copies the tree left under their temporary names, by
	// destination, until the repair pass renames them (land).
	landed map[int]FileResult
}

// probe is what the engine learns of a destination before the tree: how
// far it is and whether it can forward.
type probe struct {
	ok      bool
	rtt     time.Duration
	forward bool
}

// check refuses targets that disagree on the sources, a destination
// named twice, and a destination that is a source: a server would write a
// file while reading it.
func (m *multi) check() error {
	if len(m.targets) == 0 {
		return errors.New("no destination")
	}
	first := m.targets[0].Items
	for i, t := range m.targets {
		if len(t.Items) != len(first) {
			return fmt.Errorf("destination %d: %d items, want %d", i+1, len(t.Items), len(first))
		}
		for j, it := range t.Items {
			if it.Src != first[j].Src || it.Recursive != first[j].Recursive {
				return fmt.Errorf("destination %d: item %d is %q, want %q", i+1, j+1, it.Src, first[j].Src)
			}
			if same(m.src, t.Endpoint) && overlaps(it.Src, it.Dst) {
				return fmt.Errorf("destination %d (%s%s) is or holds the source %s: refused", i+1, t.Endpoint, it.Dst, it.Src)
			}
			for k, u := range m.targets[:i] {
				if same(u.Endpoint, t.Endpoint) && overlaps(u.Items[j].Dst, it.Dst) {
					return fmt.Errorf("destinations %d and %d are the same place (%s%s)", k+1, i+1, t.Endpoint, it.Dst)
				}
			}
		}
	}
	return nil
}

// same reports endpoints on one server: the same port at the same host,
// by name or by any of its addresses.
func same(a, b Endpoint) bool {
	ah, ap, err1 := net.SplitHostPort(a.Addr)
	bh, bp, err2 := net.SplitHostPort(b.Addr)
	if err1 != nil || err2 != nil {
		return a.Addr == b.Addr
	}
	if ap != bp {
		return false
	}
	if strings.EqualFold(ah, bh) {
		return true
	}
	as, _ := net.LookupHost(ah)
	bs, _ := net.LookupHost(bh)
	for _, x := range as {
		if slices.Contains(bs, x) {
			return true
		}
	}
	return false
}

// overlaps reports paths of which one is the other or below it.
func overlaps(a, b string) bool {
	a, b = path.Clean("/"+a), path.Clean("/"+b)
	return a == b || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/") || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/")
}

// probe dials every destination at once, for its round trip and whether
// its server offers ferry's multicast layer.
func (m *multi) probe(ctx context.Context) {
	m.probes = make([]probe, len(m.targets))
	var wg sync.WaitGroup
	for i, t := range m.targets {
		if t.Via != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			c, err := t.Endpoint.dial(pctx)
			if err != nil {
				return
			}
			defer c.Close()
			names, _ := c.Feature("DISKSTACK")
			m.probes[i] = probe{ok: true, rtt: c.RTT(), forward: offers(names, multicast.Name) && reachable(t.Endpoint)}
		}()
	}
	wg.Wait()
}

// reachable reports an endpoint other servers may connect to by its
// address, as a tree's children are.
func reachable(e Endpoint) bool { return !e.Outbound && !e.Local && e.Dial == nil }

// planTree chooses the head (the nearest destination that forwards), the
// order of the others (nearest first, those that forward before those
// that cannot) and the fan-out, and leaves out destinations the tree
// cannot hold: one that accepts no connections, or one that cannot
// forward where the tree would need it to.
func (m *multi) planTree() {
	var fwd, leaf []int
	for i, p := range m.probes {
		switch {
		case p.forward:
			fwd = append(fwd, i)
		case m.targets[i].Via != nil: // its relay's own copy (relay)
		case reachable(m.targets[i].Endpoint):
			leaf = append(leaf, i) // unreachable from here: its parent may reach it
		}
	}
	byRTT := func(a, b int) int {
		pa, pb := m.probes[a], m.probes[b]
		if pa.ok != pb.ok {
			if pa.ok {
				return -1
			}
			return 1
		}
		return int(pa.rtt - pb.rtt)
	}
	slices.SortStableFunc(fwd, byRTT)
	slices.SortStableFunc(leaf, byRTT)
	if len(fwd) == 0 {
		return
	}
	m.head = fwd[0]
	kids := append(fwd[1:len(fwd):len(fwd)], leaf...)
	// A gsiftp:// kid is logged in to with what the head's client
	// delegated: it must be of the same grid identity.
	head := m.targets[m.head].Endpoint.gridIdentity()
	kids = slices.DeleteFunc(kids, func(k int) bool {
		id := m.targets[k].Endpoint.gridIdentity()
		return id != "" && id != head
	})
	large, small := m.fanouts(len(kids))
	for {
		urls := make([]string, len(kids))
		for j, k := range kids {
			urls[j] = fmt.Sprint(k) // names only: Inner looks at positions
		}
		bad := -1
		for _, cc := range []int{large, small} {
			inner := multicast.Inner(urls, cc)
			for j, k := range kids {
				if inner[j] && !m.probes[k].forward {
					bad = j
				}
			}
		}
		if bad < 0 {
			break
		}
		kids = slices.Delete(kids, bad, bad+1)
	}
	m.tree = kids
	m.res.Head = m.head
	if len(kids) > 0 {
		m.res.Fanout, m.res.FanoutSmall = large, small
		for _, k := range kids {
			m.smallBelow = max(m.smallBelow, smallFile(m.probes[k].rtt))
		}
		m.smallBelow = max(m.smallBelow, smallFile(m.probes[m.head].rtt))
	}
}

// fanouts are the tree's fan-outs for n destinations below the head, for
// large files and for small ones (smallFile): the option's for both, else
// a chain for large files, where each server's uplink then carries the
// data once and every copy moves at the rate of one; and up to four per
// hop for small files, whose time goes to each hop's setup (a dial, a
// login, a stack: some round trips), paid once per level of the tree.
func (m *multi) fanouts(n int) (large, small int) {
	if m.opts.Fanout > 0 {
		return m.opts.Fanout, m.opts.Fanout
	}
	return 1, max(1, min(n, 4))
}

// smallFile is the size below which a file is small on a hop with round
// trip rtt: it takes less than four round trips at 1 Gbit/s.
func smallFile(rtt time.Duration) int64 {
	return int64(4 * rtt.Seconds() * 125e6)
}

// treePass copies to the head, forwarding to the tree.
func (m *multi) treePass(ctx context.Context) error {
	m.planTree()
	if m.head < 0 {
		return nil
	}
	o := m.opts
	o.Tar, o.Compress, o.ChunkSize, o.Restart = TarNever, false, -1, nil
	if m.targets[m.head].Has != nil {
		// A file the head has from an earlier run is not sent to it
		// again: the others that lack it get it in the repair pass.
		skip := o.Skip
		o.Skip = func(src, dst string) bool { return skip != nil && skip(src, dst) || m.has(m.head, src) }
	}
	if len(m.tree) > 0 {
		m.fan = &fanout{heads: m.targets[m.head].Items, cc: m.res.Fanout, ccSmall: m.res.FanoutSmall, smallBelow: m.smallBelow, inPlace: o.InPlace}
		for _, k := range m.tree {
			m.fan.kids = append(m.fan.kids, kid{target: m.targets[k], index: k})
		}
		o.fan = m.fan
	}
	r, err := Copy(ctx, m.src, m.targets[m.head].Endpoint, m.targets[m.head].Items, o, &treeReporter{m: m})
	m.mu.Lock()
	m.res.Settings, m.res.Directories, m.res.Faults = r.Settings, r.Directories, r.Faults
	m.res.Bytes += r.Bytes
	m.keep(m.head, r.Partial...)
	for _, p := range r.Partial {
		for j, kp := range m.fan.kidTemps(p) {
			m.keep(m.fan.kids[j].index, kp)
		}
	}
	m.mu.Unlock()
	m.whole = err == nil && r.Failed == 0 && r.Canceled == 0
	return err
}

// treeReporter takes the tree pass's reports: a file transferred to the
// head reached the tree but for the destinations the head named.
type treeReporter struct{ m *multi }

func (t *treeReporter) Planned(files int, bytes int64) { t.m.rep.Planned(files, bytes) }
func (t *treeReporter) Progress(d int64)               { t.m.rep.Progress(d) }
func (t *treeReporter) Fault(p string, err error, retry time.Duration) {
	t.m.rep.Fault(p, err, retry)
}
func (t *treeReporter) Done(r FileResult) {
	m := t.m
	f := m.file(r.Src, r.Size)
	m.mu.Lock()
	f.at[m.head], f.dsts[m.head] = r, r.Dst
	f.sum = r.Checksum
	m.byHead[r.Dst] = r.Src
	m.mu.Unlock()
	arrived(m.rep, m.head, r)
	if m.fan == nil {
		return
	}
	missed, suspect := m.fan.missedOf(r.Dst)
	for j, k := range m.fan.kids {
		m.mu.Lock()
		f.dsts[k.index] = m.fan.dstOf(j, r.Dst)
		if slices.Contains(suspect, j) {
			f.check[k.index] = true
		}
		var got *FileResult
		if r.Outcome == Transferred && !slices.Contains(missed, j) && !slices.Contains(suspect, j) && !m.fan.wasDead(j, r.Dst) {
			got = &FileResult{Src: r.Src, Dst: f.dsts[k.index], Size: r.Size, Outcome: Transferred, Checksum: r.Checksum, Attempts: r.Attempts}
			if !m.fan.inPlace {
				f.landed[k.index], got = *got, nil // it arrives once renamed
			} else {
				f.at[k.index] = *got
			}
		}
		m.mu.Unlock()
		if got != nil {
			arrived(m.rep, k.index, *got)
		}
	}
}

// file is the record of source file src, made on first sight.
func (m *multi) file(src string, size int64) *multiFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[src]
	if f == nil {
		f = &multiFile{size: size, at: map[int]FileResult{}, dsts: map[int]string{}, check: map[int]bool{}, landed: map[int]FileResult{}}
		m.files[src] = f
		m.order = append(m.order, src)
	}
	return f
}

// repairPass brings each destination up to date, a few at once: what the
// tree missed from the head's verified copy, the rest from the source;
// the head too, unless the tree pass left it whole.
func (m *multi) repairPass(ctx context.Context) {
	sem := make(chan struct{}, repairers)
	var wg sync.WaitGroup
	for i := range m.targets {
		if i == m.head && m.whole {
			continue // the tree pass made it whole, verified
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			m.repair(ctx, i)
		}()
	}
	wg.Wait()
}

// relay copies to destination i through its relay, from the source; the
// relay writes nothing. Nothing is listed there: every file goes.
func (m *multi) relay(ctx context.Context, i int) {
	t := m.targets[i]
	o := m.opts
	o.Tar, o.Compress, o.ChunkSize, o.Restart, o.Resume = TarNever, false, -1, nil, false
	o.SyncLevel, o.DeleteExtra = synclevel.None, false
	if t.Has != nil {
		skip := o.Skip
		o.Skip = func(src, dst string) bool { return t.Has(src) || skip != nil && skip(src, dst) }
	}
	o.fan = &fanout{heads: t.Items, kids: []kid{{target: t, index: i}}, cc: 1, relay: true, inPlace: o.InPlace}
	items := m.kept(i, t.Items)
	if len(items) == 0 {
		return
	}
	r, err := Copy(ctx, m.src, *t.Via, items, o, &repairReporter{m: m, dest: i, direct: true})
	m.count(i, r)
	if err != nil {
		m.mu.Lock()
		m.res.Dests[i].Err = fmt.Errorf("through %s: %w", t.Via, err)
		m.mu.Unlock()
	}
}

// repair brings destination i up to date: the files the tree did not
// bring, from the head's verified copy; then a copy from the source of
// whatever is still missing, by the copy's own sync level, which also
// makes the directories the tree cannot (empty ones).
func (m *multi) repair(ctx context.Context, i int) {
	t := m.targets[i]
	if t.Via != nil {
		m.relay(ctx, i)
		return
	}
	m.land(ctx, i)
	m.mu.Lock()
	var fromHead, toCheck []Item
	for _, src := range m.order {
		f := m.files[src]
		if _, ok := f.at[i]; ok || m.has(i, src) {
			continue
		}
		if h, ok := f.at[m.head]; ok && h.Outcome == Transferred && f.dsts[i] != "" {
			if f.check[i] {
				toCheck = append(toCheck, Item{Src: h.Dst, Dst: f.dsts[i]})
			} else {
				fromHead = append(fromHead, Item{Src: h.Dst, Dst: f.dsts[i]})
			}
		}
	}
	m.mu.Unlock()
	for _, c := range []struct {
		items []Item
		level synclevel.Level
	}{{fromHead, synclevel.None}, {toCheck, synclevel.Checksum}} {
		if len(c.items) == 0 {
			continue
		}
		o := m.opts
		o.SyncLevel, o.Skip, o.Filters, o.DeleteExtra, o.Restart = c.level, nil, nil, false, nil
		o.Recursive = false
		r, _ := Copy(ctx, m.targets[m.head].Endpoint, t.Endpoint, c.items, o, &repairReporter{m: m, dest: i, fromHead: true, checked: c.level == synclevel.Checksum})
		m.count(i, r)
	}
	// The rest by the copy's own rules (sync level, resume), leaving out
	// what the tree or the head delivered, verified (each hop checks its
	// children's copies), and what an earlier run did (Has). The caller's
	// Skip is asked first, as a walk asks it of every entry.
	o := m.opts
	skip := o.Skip
	o.Skip = func(src, dst string) bool {
		return skip != nil && skip(src, dst) || m.has(i, src) || m.delivered(i, src)
	}
	inTree := slices.Contains(m.tree, i)
	items := m.kept(i, t.Items)
	if len(items) == 0 {
		return
	}
	r, err := Copy(ctx, m.src, t.Endpoint, items, o, &repairReporter{m: m, dest: i, direct: !inTree})
	m.count(i, r)
	if err != nil {
		m.mu.Lock()
		m.res.Dests[i].Err = err
		m.mu.Unlock()
	}
}

// land renames the copies the tree left at destination i under their
// temporary names to their final ones, pipelined on one session: the
// head's copy of each is whole and verified, and the hop that sent it
// checked it. A copy whose rename fails (its temporary file is gone, the
// server refuses, the session breaks) is not delivered: the repair pass
// sends it from the head.
func (m *multi) land(ctx context.Context, i int) {
	m.mu.Lock()
	var rs []FileResult
	var moves [][2]string
	for _, src := range m.order {
		if r, ok := m.files[src].landed[i]; ok {
			rs = append(rs, r)
			moves = append(moves, [2]string{partname.For(r.Dst), r.Dst})
		}
	}
	m.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	c, err := m.targets[i].Endpoint.dial(ctx)
	if err != nil {
		return
	}
	defer c.Close()
	errs, err := c.RenameAll(ctx, moves)
	if err != nil {
		return
	}
	for n, r := range rs {
		if errs[n] != nil {
			continue
		}
		m.mu.Lock()
		f := m.files[r.Src]
		f.at[i] = r
		delete(f.landed, i)
		m.mu.Unlock()
		arrived(m.rep, i, r)
	}
}

// kept are the items destination i still needs: an item that is a file
// the run has seen (a walk asks Skip of the entries below a directory
// item, not of the item) is left out when the tree delivered it there or
// the destination had it.
func (m *multi) kept(i int, items []Item) []Item {
	var out []Item
	for _, it := range items {
		m.mu.Lock()
		_, file := m.files[it.Src]
		m.mu.Unlock()
		if !file || !m.delivered(i, it.Src) && !m.has(i, it.Src) {
			out = append(out, it)
		}
	}
	return out
}

// delivered reports a source file that the tree or a repair from the head
// brought to destination i.
func (m *multi) delivered(i int, src string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[src]
	if f == nil {
		return false
	}
	r, ok := f.at[i]
	return ok && (r.Outcome == Transferred || r.Outcome == repaired)
}

// keep adds paths, temporary files left at destination i, to the run's
// Result.Partial, each named with its destination ("host:port/path").
// m.mu is held.
func (m *multi) keep(i int, paths ...string) {
	for _, p := range paths {
		m.res.Partial = append(m.res.Partial, m.targets[i].Endpoint.String()+p)
	}
}

// count adds a copy to destination i's bytes, faults and temporary files
// left; without a tree pass, the first one's settings stand for the
// run's.
func (m *multi) count(i int, r Result) {
	m.mu.Lock()
	m.keep(i, r.Partial...)
	if m.head < 0 && m.res.Settings.Concurrency == 0 {
		m.res.Settings = r.Settings
	}
	m.res.Bytes += r.Bytes
	m.res.Faults += r.Faults
	m.res.Deleted += r.Deleted
	m.mu.Unlock()
}

// repairReporter takes a repair copy's reports for destination dest.
type repairReporter struct {
	m        *multi
	dest     int
	fromHead bool // its sources are the head's paths
	direct   bool // the first copy to it, not a repair
	checked  bool // it checks the tree's copies against the head's
}

// Deleted passes on a path deleted at the destination, naming it.
func (r *repairReporter) Deleted(d Deletion) {
	if del, ok := r.m.rep.(Deleter); ok {
		d.Dest = r.dest
		del.Deleted(d)
	}
}

func (r *repairReporter) Planned(_ int, bytes int64) { r.m.rep.Planned(0, bytes) }
func (r *repairReporter) Progress(d int64)           { r.m.rep.Progress(d) }
func (r *repairReporter) Fault(p string, err error, retry time.Duration) {
	r.m.rep.Fault(p, err, retry)
}
func (r *repairReporter) Done(res FileResult) {
	m := r.m
	src := res.Src
	if r.fromHead {
		m.mu.Lock()
		src = m.byHead[res.Src]
		m.mu.Unlock()
	}
	f := m.file(src, res.Size)
	res.Src = src
	treeCopy := r.checked && res.Outcome == Skipped
	if treeCopy {
		res.Outcome = Transferred // the tree's copy, the same as the head's
	}
	arrived(m.rep, r.dest, res)
	m.mu.Lock()
	defer m.mu.Unlock()
	if res.Outcome == Transferred && !r.direct && !treeCopy {
		res.Outcome = repaired
	}
	if prev, ok := f.at[r.dest]; ok && prev.Outcome != Failed && res.Outcome == Skipped {
		return // the tree delivered it, the repair pass found it there
	}
	f.at[r.dest], f.dsts[r.dest] = res, res.Dst
}

// repaired marks, within this file only, a file the repair pass sent.
const repaired Outcome = -1

// finish sums up each destination and reports each file once.
func (m *multi) finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	dr, _ := m.rep.(DestReporter)
	for _, src := range m.order {
		f := m.files[src]
		all := FileResult{Src: src, Size: f.size, Outcome: Transferred, Checksum: f.sum, Attempts: 1}
		skippedAll := true
		var missing []string
		for i := range m.targets {
			r, ok := f.at[i]
			if !ok && m.has(i, src) {
				r, ok = FileResult{Src: src, Dst: f.dsts[i], Size: f.size, Outcome: Skipped}, true
			}
			if !ok {
				r = FileResult{Src: src, Dst: f.dsts[i], Size: f.size, Outcome: Failed, Err: errors.New("not delivered")}
				if _, left := f.landed[i]; left {
					r.Err = fmt.Errorf("not delivered: whole under its temporary name %s, not renamed", partname.For(f.dsts[i]))
					m.keep(i, partname.For(f.dsts[i]))
				}
			}
			d := &m.res.Dests[i]
			switch r.Outcome {
			case repaired:
				d.Delivered++
				d.Repaired++
				r.Outcome = Transferred
			case Transferred:
				d.Delivered++
			case Skipped:
				d.Skipped++
			case Canceled:
				all.Outcome = Canceled
			default:
				d.Failed++
				d.FailedFiles = append(d.FailedFiles, r)
				missing = append(missing, fmt.Sprintf("%s: %v", m.targets[i].Endpoint, r.Err))
			}
			if r.Outcome != Skipped {
				skippedAll = false
			}
			if dr != nil {
				dr.DestDone(i, r)
			}
		}
		m.res.Files++
		switch {
		case len(missing) > 0:
			all.Outcome, all.Err = Failed, fmt.Errorf("not at %d of %d destinations: %s", len(missing), len(m.targets), strings.Join(missing, "; "))
			m.res.Failed++
			m.res.FailedFiles = append(m.res.FailedFiles, all)
		case all.Outcome == Canceled:
			m.res.Canceled++
		case skippedAll:
			all.Outcome = Skipped
			m.res.Skipped++
		default:
			m.res.Transferred++
		}
		m.rep.Done(all)
	}
}

// destOf is a single copy's result as one destination's.
func destOf(e Endpoint, r Result) DestResult {
	return DestResult{Endpoint: e.String(), Delivered: r.Transferred, Skipped: r.Skipped, Failed: r.Failed, FailedFiles: r.FailedFiles}
}

// one passes a single destination's reports on, with DestDone.
type one struct{ rep Reporter }

func (o *one) Planned(files int, bytes int64)                 { o.rep.Planned(files, bytes) }
func (o *one) Progress(d int64)                               { o.rep.Progress(d) }
func (o *one) Fault(p string, err error, retry time.Duration) { o.rep.Fault(p, err, retry) }

// Deleted passes on a path deleted at the one destination.
func (o *one) Deleted(d Deletion) {
	if del, ok := o.rep.(Deleter); ok {
		del.Deleted(d)
	}
}

func (o *one) Done(r FileResult) {
	arrived(o.rep, 0, r)
	if dr, ok := o.rep.(DestReporter); ok {
		dr.DestDone(0, r)
	}
	o.rep.Done(r)
}

// fanout is the tree pass's multicast: for each file, the stack that
// makes the head forward it to the kids still alive.
type fanout struct {
	heads []Item // the head's items, to find a file's place at each kid
	kids  []kid
	cc    int
	relay bool // the head only forwards (Target.Via)
	// inPlace: the kids write under final names (Options.InPlace), not
	// temporary ones (kidPath).
	inPlace bool
	// ccSmall is the fan-out for files smaller than smallBelow.
	ccSmall    int
	smallBelow int64

	mu     sync.Mutex
	dead   map[int]string   // kids a file did not reach, and the first such file
	missed map[string][]int // by head path: kids that file did not reach
	sent   map[string][]int // by head path: kids the last stack named
	ccOf   map[string]int   // by head path: the fan-out the last stack named
	// suspect are, by head path, the kids below one that file did not
	// reach: that hop checked their copies against what it received, which
	// may be what was wrong with its own.
	suspect map[string][]int
}

// kid is a destination below the head.
type kid struct {
	target Target
	index  int // among the targets
}

// stack is the head's stack for source file src of size bytes, which it
// receives at dst, with p streams per hop (0: one); kids that have src
// already are left out. One stream per hop unless asked: each hop's
// uplink is what limits it, and its streams' blocks must be put back in
// order at the next hop (a window of blocks), where one stream that lags
// holds the others back (8 destinations at 50 Mbit/s, 61 ms, a chain:
// 16.7 s with one stream per hop, 27–34 s with four; bench/LOG.md).
func (f *fanout) stack(src, dst string, size int64, p int) string {
	cc := f.cc
	if size < f.smallBelow && f.ccSmall > 0 {
		cc = f.ccSmall
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var urls []string
	var live []int
	for j := range f.kids {
		if _, gone := f.dead[j]; !gone && (f.kids[j].target.Has == nil || !f.kids[j].target.Has(src)) {
			live = append(live, j)
		}
	}
	if f.sent == nil {
		f.sent, f.ccOf = map[string][]int{}, map[string]int{}
	}
	f.sent[dst], f.ccOf[dst] = live, cc
	for _, j := range live {
		urls = append(urls, f.url(j, dst))
	}
	inner := multicast.Inner(urls, cc)
	for n := range urls {
		if inner[n] {
			urls[n] = multicast.WithOptions(urls[n], cc, p)
		}
	}
	// A relay renames its child's copy once checked: the engine cannot.
	return multicast.Options{URLs: urls, CC: cc, P: max(p, 1), LocalWrite: !f.relay, Part: f.relay && !f.inPlace}.Spec()
}

// url is where kid j receives the file the head receives at dst: a
// gsiftp:// URL for a GSI endpoint, which the head logs in to with the
// credential delegated to it.
func (f *fanout) url(j int, dst string) string {
	e := f.kids[j].target.Endpoint
	host, port, _ := net.SplitHostPort(e.Addr)
	u := gridftp.URL{Scheme: gridftp.FTP, Host: host, Port: port, Path: f.kidPath(j, dst)}
	switch g, ok := e.Auth.(client.GSILogin); {
	case ok:
		u.Scheme = gridftp.GSIFTP
		if g.User != "" {
			u.User = url.User(g.User)
		}
	case e.User != "":
		u.User = url.UserPassword(e.User, e.Password)
	}
	return u.String()
}

// kidPath is where kid j writes the file the head receives at dst: the
// temporary name of its place there (dstOf), unless in place or behind a
// relay, which writes under the temporary name itself (multicast.Options.Part).
func (f *fanout) kidPath(j int, dst string) string {
	if f.inPlace || f.relay {
		return f.dstOf(j, dst)
	}
	return partname.For(f.dstOf(j, dst))
}

// dstOf maps the head's path dst to kid j's: the same place below the
// kid's destination of the same item.
func (f *fanout) dstOf(j int, dst string) string {
	best := -1
	for i, it := range f.heads {
		root := path.Clean(it.Dst)
		if (dst == root || strings.HasPrefix(dst, strings.TrimSuffix(root, "/")+"/")) && (best < 0 || len(root) > len(path.Clean(f.heads[best].Dst))) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return path.Clean(f.kids[j].target.Items[best].Dst) + strings.TrimPrefix(dst, path.Clean(f.heads[best].Dst))
}

// failed reads the head's report of the kids a file did not reach, from
// its reply err, and leaves them out of the files that follow. ok is
// false when err is not such a report.
func (f *fanout) failed(dst string, err error) bool {
	names, ok := multicast.Undelivered(err)
	if !ok || f.relay {
		return false // through a relay, the one destination failed: retry it
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead == nil {
		f.dead, f.missed = map[int]string{}, map[string][]int{}
	}
	sent := f.sent[dst]
	urls := make([]string, len(sent))
	for p, j := range sent {
		urls[p] = f.url(j, dst)
		if slices.Contains(names, multicast.Show(urls[p])) {
			f.missed[dst] = append(f.missed[dst], j)
			if _, ok := f.dead[j]; !ok {
				f.dead[j] = dst
			}
		}
	}
	for p, below := range multicast.Below(urls, f.ccOf[dst]) {
		if !slices.Contains(f.missed[dst], sent[p]) {
			continue
		}
		for _, q := range below {
			if k := sent[q]; !slices.Contains(f.missed[dst], k) && !slices.Contains(f.suspect[dst], k) {
				if f.suspect == nil {
					f.suspect = map[string][]int{}
				}
				f.suspect[dst] = append(f.suspect[dst], k)
			}
		}
	}
	return true
}

// missedOf are the kids the file at dst did not reach, and those below
// them, whose copies no hop checked against the head's.
func (f *fanout) missedOf(dst string) (missed, suspect []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.missed[dst], f.suspect[dst]
}

// kidTemps are, by kid, the temporary files the kids write of the file
// the head writes under its temporary name tmp: the kids its last stack
// named.
func (f *fanout) kidTemps(tmp string) map[int]string {
	if f == nil {
		return nil // no tree
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]string{}
	for dst, sent := range f.sent {
		if partname.For(dst) != tmp {
			continue
		}
		for _, j := range sent {
			out[j] = f.kidPath(j, dst)
		}
	}
	return out
}

// wasDead reports a kid left out of the file at dst's tree.
func (f *fanout) wasDead(j int, dst string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	sent, ok := f.sent[dst]
	return ok && !slices.Contains(sent, j)
}
