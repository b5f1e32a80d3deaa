package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
)

// Tar mode: a tree of small files moves as tar streams, many files to a
// transfer, instead of one transfer per file. Each transfer costs the
// servers a command, a reply and, for a small file, a data channel
// turnaround that its few bytes cannot hide; packed into one stream, the
// files cost what their bytes cost.
//
// Each end packs or unpacks in one of two ways. A ferry server offers its
// tar layer (FEAT DISKSTACK): the source packs the members it is told of
// (SITE MEMBERS) and reports each as it goes (113, with its checksum when
// verifying); the destination unpacks them under its root, each into a
// temporary name renamed once whole, and reports each with its size and
// the checksum of what it wrote. A GCT server whose popen whitelist holds
// tar runs it: `tar cf - -C DIR ./m…` at the source, `tar xf - -C DIR` with
// ordering at the destination; it reports nothing, so once the stream
// ended well its members are looked up (MLST) and, when verifying,
// checksummed (CKSM), pipelined, on a finisher's sessions. A member is
// done when the destination holds it whole (with the source's checksum,
// when verifying); one that failed at either end goes again on its own,
// as any file would.

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
// auto mode packs them, and the most members and bytes of one batch (the
// members of a batch packed by popen travel in its command line).
const (
	tarSmall           = 1 << 20
	tarMinFiles        = 32
	tarMaxMembers      = 4096
	popenMaxMembers    = 1024
	tarMaxBytes        = 64 << 20
	maxBatchesInFlight = 2 // per session pair: two keep its data channel busy, more starve the other pairs
	batchesPerPair     = 4 // in the first window; those not in flight go to the pairs that move fastest (later windows: one a pair, which the queue keeps busy)
)

// tarLayer is the name of ferry's tar layer in FEAT DISKSTACK.
const tarLayer = "tar"

// tarEnd is how one end of a copy packs or unpacks batches.
type tarEnd struct {
	layer bool   // ferry's tar layer, which reports every member
	popen string // else the tar that the server's popen runs; "": none
}

func (e tarEnd) can() bool { return e.layer || e.popen != "" }

// popenTars are the names under which a GCT server's popen whitelist
// may hold tar (an alias, or the program's path).
var popenTars = []string{"tar", "/bin/tar", "/usr/bin/tar"}

// probeTar finds how c's server can pack and unpack: ferry's tar layer,
// which its features name; else, on a server that names no layers (GCT),
// tar through popen, if it approves the program.
func probeTar(ctx context.Context, c *client.Conn) tarEnd {
	if names, ok := c.Feature("DISKSTACK"); ok {
		return tarEnd{layer: offers(names, tarLayer)}
	}
	for _, prog := range popenTars {
		if c.SetDiskStack(ctx, "popen:argv=#"+prog) == nil {
			if c.SetDiskStack(ctx, "") != nil {
				return tarEnd{}
			}
			return tarEnd{popen: prog}
		}
	}
	return tarEnd{}
}

// offers reports whether a FEAT DISKSTACK line names a layer.
func offers(names, layer string) bool {
	for _, n := range strings.Split(names, ",") {
		if strings.TrimSpace(n) == layer {
			return true
		}
	}
	return false
}

// zstdLayer is the name of ferry's compression layer.
const zstdLayer = "zstd"

// planCompress decides whether data moves compressed: when asked and both
// ends offer the layer.
func (c *copier) planCompress(p *client.Pair) {
	if !c.opts.Compress {
		return
	}
	s, _ := p.Src.Feature("DISKSTACK")
	d, _ := p.Dst.Feature("DISKSTACK")
	c.set.Compressed = offers(s, zstdLayer) && offers(d, zstdLayer)
	if !c.set.Compressed {
		c.set.CompressNote = "compression asked for, but both ends must be ferry servers that offer it: data moves as it is"
	}
}

// popenSafe reports whether a name can travel in a popen stack: printable
// ASCII without the characters the stack grammar gives a meaning to.
func popenSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("#,;%=", c) >= 0 {
			return false
		}
	}
	return true
}

// popenPack is the stack a GCT source packs names below dir with.
func popenPack(prog, dir string, names []string) string {
	var b strings.Builder
	b.WriteString("popen:argv=#" + prog + "#cf#-#-C#" + dir)
	for _, n := range names {
		b.WriteString("#./" + n) // never an option, whatever its first character
	}
	return b.String()
}

// popenUnpack is the stack a GCT destination unpacks below dir with.
func popenUnpack(prog, dir string) string {
	return "popen:argv=#" + prog + "#xf#-#-C#" + dir + ",ordering"
}

// batch is small files of one tree that move as one tar stream: below src
// at the source and dst at the destination, by the same relative names.
type batch struct {
	src, dst string
	files    []*file
	// The current attempt: its members' names; what each end reported, and
	// the members settled, by name. Guarded by copier.mu.
	names            []string
	byName           map[string]*file
	fromSrc, fromDst map[string]gridftp.Member
	settled          map[string]bool
}

// tarable reports whether f may go in a batch: a small file of a listed
// tree, whole (no ranges from an earlier run to complete), with a name
// that both ends can take.
func (c *copier) tarable(f *file) bool {
	if f.root == nil || f.size >= tarSmall || !f.restart.Empty() {
		return false
	}
	if c.tarSrc.popen != "" || c.tarDst.popen != "" {
		return popenSafe(f.src) && popenSafe(f.dst)
	}
	return true
}

// chooseTar decides whether small files move as tar streams, and why.
// Ends not yet probed count as able.
func (c *copier) chooseTar(files []*file) (bool, string) {
	o := c.opts
	if o.Tar == TarNever {
		return false, ""
	}
	n, small := len(files), 0
	var bytes int64
	for _, f := range files {
		if c.tarable(f) {
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
	case !c.tarSrc.can() || !c.tarDst.can():
		if o.Tar == TarAlways {
			side := "the source"
			if c.tarSrc.can() {
				side = "the destination"
			}
			return false, fmt.Sprintf("tar streams asked for, but %s offers no tar (ferry's layer, or GCT's popen): one transfer per file", side)
		}
		return false, ""
	case o.Tar == TarAuto && small < tarMinFiles:
		return false, ""
	}
	why := fmt.Sprintf("%d of %d files are smaller than %d KiB (%d KiB on average, round trip %v)",
		small, n, tarSmall>>10, bytes/int64(small)>>10, c.set.RTT.Round(time.Microsecond))
	if o.Tar == TarAlways {
		why = "asked for: " + why
	}
	return true, why + ": they move as tar streams"
}

// wanTarStreams is how many streams a tar batch moves on over a WAN: a
// batch is megabytes in one transfer, and one stream's window ramps too
// slowly to carry it (2,000 × 50 KB, 60 ms, 0.01 %, cubic, 8 pairs:
// median of 3, 5.07 s on one stream a batch, 3.46 s on 4;
// bench/LOG.md, issue 17).
const wanTarStreams = 4

// tarStreams is the parallelism of a copy whose small files move as tar
// streams, and what to add to the reason for tar.
func tarStreams(o Options, s Settings) (int, string) {
	if !s.wan() || o.Parallelism > 0 || s.Parallelism >= wanTarStreams {
		return s.Parallelism, ""
	}
	return wanTarStreams, fmt.Sprintf(", on %d streams each over a wide-area link", wanTarStreams)
}

// tarWindow batches a window of the plan's files (first: the first
// window, last: the last) and returns the batches and the files that go
// one by one. Whether small files move as tar streams is decided, and
// recorded in the settings, on the first window with a file that could
// (auto mode: of tarMinFiles files or more), or on the last; till then
// files go one by one. The
// ends are asked what they can only when the files favour it; the
// planning sessions are free while a window is handed on. A decision
// after the first window keeps the streams tuning gave the files. The
// first window is cut into batchesPerPair batches a pair, later ones
// into one a pair: fewer, larger batches.
func (c *copier) tarWindow(ctx context.Context, files []*file, first, last bool) ([]*batch, []*file) {
	if !c.tarDecided {
		if !last && c.opts.Tar != TarNever && (c.opts.Tar == TarAuto && len(files) < tarMinFiles || !slices.ContainsFunc(files, c.tarable)) {
			return nil, files
		}
		c.tarDecided = true
		why := c.tarDecide(ctx, files)
		switch {
		case c.tarPer > 0 && c.tarDst.popen != "":
			why += ", on one stream each (GCT's tar through popen takes its stream only in order)"
		case first && c.tarPer > 0:
			var more string
			c.set.Parallelism, more = tarStreams(c.opts, c.set)
			why += more
		}
		c.setTar(first, func(s *Settings) { s.TarReason = why })
	}
	if c.tarPer == 0 {
		return nil, files
	}
	want := c.set.Concurrency
	if first {
		want *= batchesPerPair
	}
	bs, rest := c.batches(files, want, c.tarPer)
	c.setTar(first, func(s *Settings) { s.Batches += len(bs) })
	return bs, rest
}

// setTar records a tar setting: in the settings begin reports, for the
// first window, else in the result's.
func (c *copier) setTar(first bool, set func(*Settings)) {
	if first {
		set(&c.set)
		return
	}
	c.mu.Lock()
	set(&c.res.Settings)
	c.mu.Unlock()
}

// tarDecide decides whether small files move as tar streams (tarPer > 0)
// and says why.
func (c *copier) tarDecide(ctx context.Context, files []*file) string {
	c.tarSrc, c.tarDst = tarEnd{layer: true}, tarEnd{layer: true}
	if use, _ := c.chooseTar(files); !use || c.listing == nil {
		c.tarSrc, c.tarDst = tarEnd{}, tarEnd{}
		return ""
	}
	p := c.listing
	both(func() { c.tarSrc = probeTar(ctx, p.Src) }, func() { c.tarDst = probeTar(ctx, p.Dst) })
	use, why := c.chooseTar(files)
	if !use {
		return why
	}
	c.tarPer = tarMaxMembers
	if c.tarSrc.popen != "" {
		c.tarPer = popenMaxMembers
	}
	return why
}

// batches groups the tarable files into batches of one tree each, of at
// most per members, at least want of them where there are files enough,
// so that every session pair has one to move. The rest is returned as it
// was.
func (c *copier) batches(files []*file, want, per int) (bs []*batch, rest []*file) {
	type key struct{ src, dst string }
	trees := map[key][]*file{}
	var order []key
	var count int
	var bytes int64
	for _, f := range files {
		if !c.tarable(f) {
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
	n := max(want, (count+per-1)/per, int((bytes+tarMaxBytes-1)/tarMaxBytes))
	size := max(1, (count+n-1)/n)
	for _, k := range order {
		fs := trees[k]
		for len(fs) > 0 {
			m := min(size, len(fs))
			bs = append(bs, &batch{src: k.src, dst: k.dst, files: fs[:m:m]})
			fs = fs[m:]
		}
	}
	return bs, rest
}

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

// rel is f's name below its batch's roots.
func (b *batch) rel(f *file) string {
	return strings.TrimPrefix(f.src, strings.TrimSuffix(b.src, "/")+"/")
}

// tarStack is ferry's tar layer, hashing each member with the copy's
// algorithm when verifying.
func (c *copier) tarStack() string {
	if c.opts.Verify && c.set.Algorithm != "" {
		return tarLayer + ":cksm=" + strings.ToLower(c.set.Algorithm)
	}
	return tarLayer
}

// stacksFor are the stacks u needs at the source and the destination
// ("" for the default); a batch's part is made.
func (c *copier) stacksFor(u *unit) (src, dst string) {
	if u.b == nil {
		if c.opts.fan != nil {
			return "", c.opts.fan.stack(u.f.src, u.f.dst, u.f.size, c.opts.Parallelism)
		}
		if c.set.Compressed && u.n < 0 && u.part.Have.Empty() {
			return zstdLayer, zstdLayer // a whole file, read and written from start to end
		}
		return "", ""
	}
	src, dst = c.tarStack(), c.tarStack()
	if c.set.Compressed && c.tarSrc.layer && c.tarDst.layer {
		src, dst = src+","+zstdLayer, dst+","+zstdLayer
	}
	if c.tarSrc.popen != "" {
		src = popenPack(c.tarSrc.popen, u.b.src, u.b.names)
	}
	if c.tarDst.popen != "" {
		dst = popenUnpack(c.tarDst.popen, u.b.dst)
	}
	return src, dst
}

// streams is the parallelism of u's transfer: a batch that GCT's tar
// unpacks through popen goes on one stream. GCT's ordering driver passes
// writes on in the order they come (it orders only reads), so the blocks
// of several streams reached tar out of order ("Skipping to next header")
// and the batch failed. A program's stack is set between transfers only,
// so the pair's parallelism changes with it.
func (c *copier) streams(u *unit) int {
	if u.b != nil && c.tarDst.popen != "" {
		return 1
	}
	return c.set.Parallelism
}

// popenStack reports whether any of stacks runs a program: GCT approves
// or refuses those when they are set, so they are set alone (setStacks).
func popenStack(stacks ...string) bool {
	for _, s := range stacks {
		if strings.HasPrefix(s, "popen:") {
			return true
		}
	}
	return false
}

// stackChange is the SITE SETDISKSTACK argument that makes c's stack
// spec, or "" when it is that already.
func stackChange(c *client.Conn, spec string) string {
	switch {
	case spec == c.DiskStack():
		return ""
	case spec == "":
		return "default"
	}
	return spec
}

// setStacks sets the stacks of both ends of p.
func setStacks(ctx context.Context, p *client.Pair, src, dst string) error {
	var serr, derr error
	both(func() { serr = p.Src.SetDiskStack(ctx, src) }, func() { derr = p.Dst.SetDiskStack(ctx, dst) })
	if serr != nil {
		return fmt.Errorf("source: %w", serr)
	}
	if derr != nil {
		return fmt.Errorf("destination: %w", derr)
	}
	return nil
}

// stackRefused falls back, when an end refused a batch's stack, to one
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

// batchPart is the transfer of a batch's files that are not yet final;
// the source's tar layer is told their names.
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
	b.names = make([]string, len(live))
	b.byName = make(map[string]*file, len(live))
	for i, f := range live {
		b.names[i] = b.rel(f)
		b.byName[b.names[i]] = f
	}
	b.fromSrc, b.fromDst, b.settled = map[string]gridftp.Member{}, map[string]gridftp.Member{}, map[string]bool{}
	part := client.Part{SrcPath: b.src, DstPath: b.dst, Length: -1}
	if c.tarSrc.layer {
		part.Members = b.names
	}
	return part
}

// batchMarkers takes the members each end reports while a batch moves.
func (c *copier) batchMarkers(u *unit) client.Markers {
	return client.Markers{Members: func(fromSrc bool, ms []gridftp.Member) {
		for _, m := range ms {
			c.member(u, fromSrc, m)
		}
	}}
}

// member takes one end's report of one member and settles the member once
// the reports say how it fared: a failure at either end, or its arrival
// at a destination that reports (with the source's checksum, when
// verifying). The rest wait for the end of the stream (batchMoved).
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
	if !sok {
		s.Size = -1 // a source that does not report (popen)
	}
	var err error
	switch {
	case b.settled[m.Name]:
		c.mu.Unlock()
		return
	case sok && s.Fault != nil:
		err = &client.EndError{Err: &gridftp.Error{Reply: *s.Fault}}
	case dok && d.Fault != nil:
		err = &client.EndError{Dest: true, Err: &gridftp.Error{Reply: *d.Fault}}
	case !dok || c.opts.Verify && !sok:
		c.mu.Unlock()
		return
	}
	f := b.byName[m.Name]
	if f == nil {
		c.mu.Unlock()
		return // not asked for: a server's mistake, ignored
	}
	b.settled[m.Name] = true
	c.mu.Unlock()
	if err == nil {
		err = c.compare(f, s.Size, d.Size, s.Sum, d.Sum)
	}
	c.settle(f, d.Sum, err)
}

// compare checks what arrived of f against what the source sent: sizes
// (-1: not known), and checksums when verifying.
func (c *copier) compare(f *file, srcSize, dstSize int64, srcSum, dstSum string) error {
	switch {
	case dstSize != f.size || srcSize >= 0 && srcSize != dstSize:
		return fmt.Errorf("%w: %d bytes arrived, %d listed", errSourceChanged, dstSize, f.size)
	case c.opts.Verify && (srcSum == "" || !strings.EqualFold(srcSum, dstSum)):
		return fmt.Errorf("%w: %s %s at source, %s at destination", errMismatch, c.set.Algorithm, srcSum, dstSum)
	}
	return nil
}

// settle ends one member of a batch: done, or (err) it goes again on its
// own.
func (c *copier) settle(f *file, sum string, err error) {
	if err != nil {
		c.fail(&unit{f: f, n: -1}, err)
		return
	}
	c.memberMoved(f, f.size)
	if c.opts.Verify {
		f.sum = c.set.Algorithm + ":" + strings.ToLower(sum)
	}
	c.final(f, Transferred, nil)
}

// memberMoved counts the d bytes of a member that arrived: reported with
// its result (FileResult.Unreported) to a FileProgress reporter, which
// stores them with its record at once, else by Progress.
func (c *copier) memberMoved(f *file, d int64) {
	if _, ok := c.rep.(FileProgress); !ok {
		c.progress(f, d)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !f.ended {
		c.res.Bytes += d
		f.moved += d
		f.unreported += d
	}
}

// batchMoved settles the members of a batch whose stream ended well that
// the reports did not settle. A destination that reports names every
// member it unpacked: one it did not name goes again on its own. Members
// an end did not report (popen's tar) are looked up and, when verifying,
// checksummed there, on a finisher.
func (c *copier) batchMoved(ctx context.Context, u *unit) {
	b := u.b
	c.mu.Lock()
	var left []*file
	for _, f := range b.files {
		if !b.settled[b.rel(f)] && !f.ended {
			b.settled[b.rel(f)] = true
			left = append(left, f)
		}
	}
	c.mu.Unlock()
	if len(left) == 0 {
		return
	}
	if c.tarDst.layer && !c.opts.Verify || c.tarDst.layer && c.tarSrc.layer {
		for _, f := range left {
			c.fail(&unit{f: f, n: -1}, errors.New("the tar stream ended without it"))
		}
		return
	}
	c.finish(ctx, func(p *client.Pair) error { return c.checkMembers(ctx, p, b, left) })
}

// checkMembers looks up, on a finisher's pair p, what the ends did not
// report of files and settles them. A broken session sends them again.
func (c *copier) checkMembers(ctx context.Context, p *client.Pair, b *batch, files []*file) error {
	if p == nil {
		err := c.sessionless()
		for _, f := range files {
			c.fail(&unit{f: f, n: -1}, err)
		}
		return err
	}
	rels, dst := make([]string, len(files)), make([]string, len(files))
	for i, f := range files {
		rels[i], dst[i] = b.rel(f), f.dst
	}
	c.mu.Lock()
	from := func(m map[string]gridftp.Member, f *file) (gridftp.Member, bool) {
		r, ok := m[b.rel(f)]
		return r, ok
	}
	srcRep, dstRep := make([]gridftp.Member, len(files)), make([]gridftp.Member, len(files))
	srcHas, dstHas := make([]bool, len(files)), make([]bool, len(files))
	for i, f := range files {
		srcRep[i], srcHas[i] = from(b.fromSrc, f)
		dstRep[i], dstHas[i] = from(b.fromDst, f)
	}
	c.mu.Unlock()
	var sizes []gridftp.Entry
	var sizeErrs, srcErrs, dstErrs []error
	var srcSums, dstSums []string
	var serr, derr error
	both(func() {
		if c.opts.Verify && !c.tarSrc.layer {
			srcSums, srcErrs, serr = c.srcSums.sums(ctx, p.Src, c.set.Algorithm, b.src, rels)
		}
	}, func() {
		if !c.tarDst.layer {
			if sizes, sizeErrs, derr = p.Dst.StatAll(ctx, dst); derr == nil && c.opts.Verify {
				dstSums, dstErrs, derr = c.dstSums.sums(ctx, p.Dst, c.set.Algorithm, b.dst, rels)
			}
		}
	})
	if err := errors.Join(serr, derr); err != nil {
		for _, f := range files {
			c.fail(&unit{f: f, n: -1}, err)
		}
		return err
	}
	for i, f := range files {
		s, d := srcRep[i], dstRep[i]
		if !srcHas[i] {
			s = gridftp.Member{Size: -1}
		}
		var err error
		if srcSums != nil {
			s.Sum, err = srcSums[i], srcErrs[i]
		}
		if sizes != nil && err == nil {
			d.Size, err = sizes[i].Size, sizeErrs[i]
			if dstSums != nil && err == nil {
				d.Sum, err = dstSums[i], dstErrs[i]
			}
		} else if !dstHas[i] && err == nil {
			err = errors.New("the tar stream ended without it")
		}
		if err == nil {
			err = c.compare(f, s.Size, d.Size, s.Sum, d.Sum)
		}
		c.settle(f, d.Sum, err)
	}
	return nil
}

// batchFailed settles a batch's transfer that failed with err: the
// members no end settled go again, as a batch after a backoff; each on
// its own when the error is fatal or the tries are used up, so that each
// says which of them is at fault.
func (c *copier) batchFailed(u *unit, err error) {
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
	select {
	case <-c.done:
		return // the run is stopping
	default:
	}
	if fault.IsFatal(err) {
		c.filled(err)
		return
	}
	next := &unit{b: &batch{src: b.src, dst: b.dst, files: left}, attempts: u.attempts, wait: u.wait, seen: u.seen}
	if canceled {
		c.q.push(next) // a cancel stopped the pair: not the batch's fault
		return
	}
	next.attempts++
	c.mu.Lock()
	c.res.Faults++
	c.mu.Unlock()
	if fault.Final(err) || next.attempts >= c.opts.maxAttempts() {
		c.rep.Fault(fmt.Sprintf("%s (tar stream of %d files, which go one by one)", b.src, len(left)), err, 0)
		c.lookFirst(next, func(left []*file, _ error) {
			for _, f := range left {
				c.q.push(&unit{f: f, n: -1})
			}
		})
		return
	}
	delay := c.backoff(&next.wait, &next.seen, err)
	c.rep.Fault(fmt.Sprintf("%s (tar stream of %d files)", b.src, len(left)), err, delay)
	c.after(delay, func() {
		c.lookFirst(next, func(left []*file, err error) {
			next.b.files = left
			switch {
			case err != nil:
				c.batchFailed(next, err) // the endpoints did not answer: the retry failed
			case len(left) > 0:
				c.q.push(next)
			}
		})
	})
}

// lookFirst hands the members of the failed batch u that are to go again
// to then, but for those whole at the destination: a member can arrive
// whole, under its final name, before either end reports it (GCT's tar
// through popen reports none until its stream ends; ferry's layer reports
// as it goes), so a finisher looks the members up first and settles, by
// checksums at both ends, those equal to their source (settleWhole).
// Without an algorithm both ends compute nothing is trusted: all go again.
// err is why the finisher could not look; then all go again.
func (c *copier) lookFirst(u *unit, then func(left []*file, err error)) {
	if c.sumAlg == "" || c.opts.fan != nil {
		then(u.b.files, nil)
		return
	}
	go c.finish(c.ctx, func(p *client.Pair) error {
		left, err := c.settleWhole(c.ctx, p, u.b)
		then(left, err)
		return err
	})
}

// settleWhole settles, on a finisher's pair p, the members of b whole at
// the destination and equal to their source by checksum, and returns the
// rest; err is a broken session or one that could not be had.
func (c *copier) settleWhole(ctx context.Context, p *client.Pair, b *batch) (left []*file, err error) {
	c.mu.Lock()
	var files []*file
	for _, f := range b.files {
		if !f.ended {
			files = append(files, f)
		}
	}
	c.mu.Unlock()
	if len(files) == 0 {
		return nil, nil
	}
	if p == nil {
		return files, c.sessionless()
	}
	dst := make([]string, len(files))
	for i, f := range files {
		dst[i] = f.dst
	}
	ents, errs, err := p.Dst.StatAll(ctx, dst)
	if err != nil {
		return files, err
	}
	var whole []*file
	var rels []string
	for i, f := range files {
		if errs[i] == nil && !ents[i].IsDir() && ents[i].Size == f.size {
			whole = append(whole, f)
			rels = append(rels, b.rel(f))
		} else {
			left = append(left, f)
		}
	}
	if len(whole) == 0 {
		return files, nil
	}
	var srcSums, dstSums []string
	var srcErrs, dstErrs []error
	var serr, derr error
	both(func() { srcSums, srcErrs, serr = c.srcSums.sums(ctx, p.Src, c.sumAlg, b.src, rels) },
		func() { dstSums, dstErrs, derr = c.dstSums.sums(ctx, p.Dst, c.sumAlg, b.dst, rels) })
	if err := errors.Join(serr, derr); err != nil {
		return files, err
	}
	for i, f := range whole {
		if srcErrs[i] == nil && dstErrs[i] == nil && srcSums[i] != "" && strings.EqualFold(srcSums[i], dstSums[i]) {
			c.settle(f, dstSums[i], nil)
		} else {
			left = append(left, f)
		}
	}
	return left, nil
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
