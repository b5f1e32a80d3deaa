package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// Tar mode: a tree of small files moves as tar streams, many files to a
// transfer, instead of one transfer per file. Each transfer costs the
// servers a command, a reply and, for a small file, a data channel
// turnaround that its few bytes cannot hide; packed into one stream, the
// files cost what their bytes cost. Both ends must offer ferry's tar layer
// (FEAT DISKSTACK): the source packs the members it is told of (SITE
// MEMBERS) and reports each as it goes (113), the destination unpacks them
// under its root, each into a temporary name renamed once whole, and
// reports each with its size and, when verifying, the checksum of what it
// wrote. A member is done when the destination reported it whole (and, when
// verifying, with the source's checksum); one that failed at either end
// goes again on its own, as any file would.

// TarMode says when the engine moves files as tar streams.
type TarMode int

const (
	TarAuto   TarMode = iota // when the file mix and the round trip favour it
	TarAlways                // every small file of a tree, when both ends can
	TarNever
)

// ParseTarMode reads auto, always or never.
func ParseTarMode(s string) (TarMode, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return TarAuto, nil
	case "always":
		return TarAlways, nil
	case "never":
		return TarNever, nil
	}
	return 0, fmt.Errorf("tar mode %q: want auto, always or never", s)
}

func (m TarMode) String() string {
	return [...]string{"auto", "always", "never"}[m]
}

// Limits of tar mode: the largest file a tar stream takes (a larger one
// fills its own transfer's data channel), the fewest small files for which
// auto mode packs them, and the most members and bytes of one batch.
const (
	tarSmall      = 1 << 20
	tarMinFiles   = 32
	tarMaxMembers = 4096
	tarMaxBytes   = 64 << 20
)

// maxBatchesInFlight is how many batches one session pair pipelines: two
// keep its data channel busy between them, and more would leave the other
// pairs without.
const maxBatchesInFlight = 2

// batchesIn counts the batches among us.
func batchesIn(us []*unit) int {
	n := 0
	for _, u := range us {
		if u.b != nil {
			n++
		}
	}
	return n
}

// tarLayer is the name of ferry's tar layer in FEAT DISKSTACK.
const tarLayer = "tar"

// offersTar reports whether a session's server offers ferry's tar layer.
func offersTar(c *client.Conn) bool {
	names, ok := c.Feature("DISKSTACK")
	if !ok {
		return false
	}
	for _, n := range strings.Split(names, ",") {
		if strings.TrimSpace(n) == tarLayer {
			return true
		}
	}
	return false
}

// batch is small files of one tree that move as one tar stream: below src
// at the source and dst at the destination, by the same relative names.
type batch struct {
	src, dst string
	files    []*file
	// What each end reported of the current attempt, and the members it
	// settled, by name; guarded by copier.mu.
	fromSrc, fromDst map[string]gridftp.Member
	settled          map[string]bool
}

// tarable reports whether f may go in a batch: a small file of a listed
// tree, whole (no ranges from an earlier run to complete).
func tarable(f *file) bool {
	return f.root != nil && f.size < tarSmall && f.restart.Empty()
}

// chooseTar decides whether small files move as tar streams, and why.
func chooseTar(o Options, files []*file, rtt time.Duration, srcTar, dstTar bool) (bool, string) {
	if o.Tar == TarNever {
		return false, ""
	}
	n, small := len(files), 0
	var bytes int64
	for _, f := range files {
		if tarable(f) {
			small++
			bytes += f.size
		}
	}
	switch {
	case small == 0:
		return false, ""
	case o.PreserveMtime:
		if o.Tar == TarAlways {
			return false, "tar streams asked for, but they do not keep modification times: one transfer per file"
		}
		return false, ""
	case !srcTar || !dstTar:
		if o.Tar == TarAlways {
			side := "the source"
			if srcTar {
				side = "the destination"
			}
			return false, fmt.Sprintf("tar streams asked for, but %s offers no tar layer: one transfer per file", side)
		}
		return false, ""
	case o.Tar == TarAuto && small < tarMinFiles:
		return false, ""
	}
	why := fmt.Sprintf("%d of %d files are smaller than %d KiB (%d KiB on average, round trip %v)",
		small, n, tarSmall>>10, bytes/int64(small)>>10, rtt.Round(time.Microsecond))
	if o.Tar == TarAlways {
		why = "asked for: " + why
	}
	return true, why + ": they move as tar streams"
}

// tarPlan decides whether small files move as tar streams, records it in
// the settings, and returns the batches and the files that go one by one.
func (c *copier) tarPlan(files []*file) ([]*batch, []*file) {
	srcTar, dstTar := false, false
	if p := c.listing; p != nil {
		srcTar, dstTar = offersTar(p.Src), offersTar(p.Dst)
	}
	use, why := chooseTar(c.opts, files, c.set.RTT, srcTar, dstTar)
	c.set.TarReason = why
	if !use {
		return nil, files
	}
	bs, rest := batches(files, 2*c.set.Concurrency)
	c.set.Batches = len(bs)
	return bs, rest
}

// stackRefused falls back, when an end refused a unit's stack, to one
// transfer per file; any other unit fails as a transfer would.
func (c *copier) stackRefused(u *unit, err error) {
	if u.b == nil {
		c.fail(u, err)
		return
	}
	for _, f := range u.b.files {
		c.q.push(&unit{f: f, n: -1})
	}
}

// batches groups the tarable files into batches of one tree each, at
// least want of them where there are files enough, so that every session
// pair has one to move. The rest is returned as it was.
func batches(files []*file, want int) (bs []*batch, rest []*file) {
	type key struct{ src, dst string }
	trees := map[key][]*file{}
	var order []key
	var count int
	var bytes int64
	for _, f := range files {
		if !tarable(f) {
			rest = append(rest, f)
			continue
		}
		k := key{f.root.src, f.root.dst}
		if _, ok := trees[k]; !ok {
			order = append(order, k)
		}
		trees[k] = append(trees[k], f)
		count++
		bytes += f.size
	}
	if count == 0 {
		return nil, rest
	}
	n := max(want, (count+tarMaxMembers-1)/tarMaxMembers, int((bytes+tarMaxBytes-1)/tarMaxBytes))
	per := max(1, (count+n-1)/n)
	for _, k := range order {
		fs := trees[k]
		for len(fs) > 0 {
			m := min(per, len(fs))
			bs = append(bs, &batch{src: k.src, dst: k.dst, files: fs[:m:m]})
			fs = fs[m:]
		}
	}
	return bs, rest
}

// rel is f's name below its batch's roots.
func (b *batch) rel(f *file) string {
	return strings.TrimPrefix(f.src, strings.TrimSuffix(b.src, "/")+"/")
}

// tarStack is the stack both ends use for batches: the tar layer, which
// hashes each member with the copy's algorithm when verifying.
func (c *copier) tarStack() string {
	if c.opts.Verify && c.set.Algorithm != "" {
		return tarLayer + ":cksm=" + strings.ToLower(c.set.Algorithm)
	}
	return tarLayer
}

// stackFor is the stack a unit needs at both ends: "" for the default.
func (c *copier) stackFor(u *unit) string {
	if u.b != nil {
		return c.tarStack()
	}
	return ""
}

// setStacks sets a stack at both ends of p.
func setStacks(ctx context.Context, p *client.Pair, spec string) error {
	var serr, derr error
	both(func() { serr = p.Src.SetDiskStack(ctx, spec) }, func() { derr = p.Dst.SetDiskStack(ctx, spec) })
	if serr != nil {
		return fmt.Errorf("source: %w", serr)
	}
	if derr != nil {
		return fmt.Errorf("destination: %w", derr)
	}
	return nil
}

// batchPart is the transfer of a batch's files that are not yet final.
func (c *copier) batchPart(u *unit) client.Part {
	b := u.b
	c.mu.Lock()
	defer c.mu.Unlock()
	live := b.files[:0]
	for _, f := range b.files {
		if !f.ended {
			live = append(live, f)
		}
	}
	b.files = live
	names := make([]string, len(live))
	for i, f := range live {
		names[i] = b.rel(f)
	}
	b.fromSrc, b.fromDst, b.settled = map[string]gridftp.Member{}, map[string]gridftp.Member{}, map[string]bool{}
	return client.Part{SrcPath: b.src, DstPath: b.dst, Length: -1, Members: names}
}

// batchMarkers takes the members each end reports while a batch moves.
func (c *copier) batchMarkers(u *unit) client.Markers {
	return client.Markers{Members: func(fromSrc bool, ms []gridftp.Member) {
		for _, m := range ms {
			c.member(u, fromSrc, m)
		}
	}}
}

// member takes one end's report of one member, and settles the member
// once what is known says how it fared.
func (c *copier) member(u *unit, fromSrc bool, m gridftp.Member) {
	b := u.b
	c.mu.Lock()
	if fromSrc {
		b.fromSrc[m.Name] = m
	} else {
		b.fromDst[m.Name] = m
	}
	s, sok := b.fromSrc[m.Name]
	d, dok := b.fromDst[m.Name]
	var err error
	switch {
	case b.settled[m.Name]:
		c.mu.Unlock()
		return
	case sok && s.Fault != nil:
		err = &gridftp.Error{Reply: *s.Fault}
	case dok && d.Fault != nil:
		err = &gridftp.Error{Reply: *d.Fault}
	case !dok || c.opts.Verify && !sok:
		c.mu.Unlock()
		return // more to come
	}
	b.settled[m.Name] = true
	c.mu.Unlock()
	c.settle(u, m.Name, s, d, err)
}

// settle ends one member of a batch: done when it arrived whole (with the
// source's checksum, when verifying), else it goes again on its own.
func (c *copier) settle(u *unit, name string, s, d gridftp.Member, err error) {
	f := u.b.find(name)
	if f == nil {
		return // not asked for: a server's mistake, ignored
	}
	if err == nil {
		switch {
		case d.Size != f.size || c.opts.Verify && s.Size != d.Size:
			err = fmt.Errorf("%w: %d bytes arrived, %d listed", errSourceChanged, d.Size, f.size)
		case c.opts.Verify && (s.Sum == "" || !strings.EqualFold(s.Sum, d.Sum)):
			err = fmt.Errorf("%w: %s %s at source, %s at destination", errMismatch, c.set.Algorithm, s.Sum, d.Sum)
		}
	}
	if err != nil {
		c.fail(&unit{f: f, n: -1}, err)
		return
	}
	c.progress(f, f.size)
	if c.opts.Verify {
		f.sum = c.set.Algorithm + ":" + strings.ToLower(d.Sum)
	}
	c.final(f, Transferred, nil)
}

// find is the batch's file of a member name.
func (b *batch) find(name string) *file {
	for _, f := range b.files {
		if b.rel(f) == name {
			return f
		}
	}
	return nil
}

// batchDone settles a batch's transfer that ended with err: members no end
// reported go again, as a batch after a backoff when the transfer failed,
// each on its own when it went well (a server that skipped them says no
// more by being asked again).
func (c *copier) batchDone(u *unit, err error) {
	b := u.b
	c.mu.Lock()
	var left []*file
	canceled := false
	for _, f := range b.files {
		switch {
		case b.settled[b.rel(f)]:
		case f.ended:
			canceled = canceled || c.isCanceled(f.src)
		default:
			left = append(left, f)
		}
	}
	c.mu.Unlock()
	if len(left) == 0 {
		return
	}
	if err == nil {
		for _, f := range left {
			c.fail(&unit{f: f, n: -1}, errors.New("the tar stream ended without it"))
		}
		return
	}
	select {
	case <-c.done:
		return // the run is stopping
	default:
	}
	if gridftp.Classify(err) == gridftp.FaultNoSpace {
		c.filled(err)
		return
	}
	next := &unit{b: &batch{src: b.src, dst: b.dst, files: left}, attempts: u.attempts}
	if canceled {
		c.q.push(next) // a cancel stopped the pair: not the batch's fault
		return
	}
	next.attempts++
	c.mu.Lock()
	c.res.Faults++
	c.mu.Unlock()
	if Fatal(err) || next.attempts >= c.opts.maxAttempts() {
		// Each file on its own says which of them is at fault.
		for _, f := range left {
			c.q.push(&unit{f: f, n: -1})
		}
		return
	}
	base, ceiling := c.opts.backoff()
	delay := min(base<<min(next.attempts-1, 20), ceiling)
	c.rep.Fault(fmt.Sprintf("%s (tar stream of %d files)", b.src, len(left)), err, delay)
	time.AfterFunc(delay, func() { c.q.push(next) })
}

// covers reports whether canceling p cancels a file u moves.
func (u *unit) covers(p string) bool {
	if u.b == nil {
		return covers(p, u.f.src)
	}
	for _, f := range u.b.files {
		if covers(p, f.src) {
			return true
		}
	}
	return false
}

// treeRoot is where a listed tree starts at both ends.
type treeRoot struct{ src, dst string }

// under reports whether the file's names below both roots are the same.
func (r *treeRoot) under(src, dst string) bool {
	rs, ok1 := strings.CutPrefix(src, strings.TrimSuffix(r.src, "/")+"/")
	rd, ok2 := strings.CutPrefix(dst, strings.TrimSuffix(r.dst, "/")+"/")
	return ok1 && ok2 && rs == rd && path.Clean(rs) == rs
}
