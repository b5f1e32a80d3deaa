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
	"ferry/internal/partname"
)

// file is one file to copy and its progress.
type file struct {
	src, dst string
	tmp      string // where its data goes until it is whole (partname); "": dst
	size     int64
	mtime    time.Time

	// guarded by copier.mu
	units      int            // units not yet done
	have       gridftp.Ranges // restart ranges of an unchunked transfer
	attempts   int
	ended      bool           // its outcome is reported: failed, canceled or done
	outcome    Outcome        // when ended
	touched    bool           // a transfer of it started: it may be partial at the destination
	renameSent bool           // its rename from tmp was sent (whereIs)
	moved      int64          // bytes reported moved
	restart    gridftp.Ranges // at the destination from an earlier run (Options.Restart)
	chunks     gridftp.Ranges // chunks done
	sum        string
	root       *treeRoot // the listed tree it is in, by the same name below both roots; nil: none
}

// at is where f's data is written: its temporary name, or its final one.
func (f *file) at() string {
	if f.tmp != "" {
		return f.tmp
	}
	return f.dst
}

// planner lists sources and destinations and decides what to move. It
// writes nothing at the destination before every item is looked up and
// every source tree listed, so a destination inside its own source cannot
// make a walk go on for ever, and no destination that is one of the
// copy's sources is ever written or deleted (see sources).
type planner struct {
	src, dst *client.Conn
	opts     Options
	alg      string
	files    []*file
	skipped  []FileResult
	failed   []FileResult // directories that could not be listed, destinations refused
	// skippedErrs are source paths the source refused to give, skipped
	// (Options.SkipSourceErrors).
	skippedErrs []FileResult
	resumed     []FileResult // whole at the destination after an interrupted run (Options.Resume)
	dirs        int          // directories walked
	deleted     int          // paths deleteExtra deleted
	deleter     Deleter      // told of each; nil: none
	sources     sources
	root        *treeRoot // the tree being placed
	// summed holds, by destination, whether the checksums of a directory's
	// files (sameSums) matched at both ends, until decide takes it.
	summed           map[string]bool
	srcSums, dstSums *sumEnd  // how each end computes checksum lists
	stale            []string // temporary files of files whole at the destination (leftOver)
}

// look is one item looked up at both ends, before anything is written.
type look struct {
	it   Item
	e    gridftp.Entry // the source
	dst  string        // where a file goes; a directory's destination is it.Dst
	have *gridftp.Entry
	part *gridftp.Entry // a file's temporary name at the destination, left by an earlier run
	// A directory: its listing, and the nearest existing ancestor-or-self
	// of its destination (mkdirs creates what lies below it).
	tree  *tree
	exist string
}

// tree is a listed source directory: the entries the filters keep, in
// listing order, and every name listed (an excluded name is not extra).
type tree struct {
	src     string
	entries []gridftp.Entry
	subs    map[string]*tree
	names   map[string]bool
	// The destination directory's listing, when it was listed with this
	// one (listItem).
	dst       []gridftp.Entry
	dstListed bool
}

// errBlind is what a relay (Options.blind) says of a destination path:
// the engine cannot see it.
var errBlind = errors.New("the destination is behind a relay")

// isNotFound reports a reply saying the path does not exist.
func isNotFound(err error) bool { return gridftp.Classify(err) == gridftp.FaultNotFound }

// ItemError says why an item cannot be copied at all: its source is
// missing, a directory without recursion, or its destination is a file
// where a directory is needed, the source itself, or inside it. No retry
// mends it.
type ItemError struct {
	Path     string // the path at fault
	Dest     bool   // Path is at the destination, not the source
	Why      string
	NotFound bool // the source does not exist
}

func (e *ItemError) Error() string {
	side := "source "
	if e.Dest {
		side = "destination "
	}
	return side + e.Path + ": " + e.Why
}

// errSameFile refuses a destination that is one of the copy's sources.
var errSameFile = errors.New("refused: the destination is the same file as a source of this transfer")

// Check looks up items at both ends as Copy does before it writes
// anything, and returns the first reason an item cannot be copied (an
// *ItemError). Other errors mean an end could not be reached or refused
// the login. It lists no directory: it is cheap enough to run when a
// transfer is submitted.
func Check(ctx context.Context, src, dst Endpoint, items []Item, opts Options) error {
	c := &copier{src: src, dst: dst, opts: opts}
	pair, err := c.dialPair(ctx)
	if err != nil {
		return err
	}
	defer pair.Close()
	if err := c.secure(pair.Src, pair.Dst); err != nil {
		return err
	}
	p := &planner{src: pair.Src, dst: pair.Dst, opts: opts, srcSums: &sumEnd{}, dstSums: &sumEnd{}}
	for _, it := range items {
		if _, err := p.look(ctx, it); err != nil {
			return err
		}
	}
	return nil
}

// plan expands items into files: it looks up every item and lists every
// source tree, then creates the destination directories and decides each
// file by sync level.
func (p *planner) plan(ctx context.Context, items []Item) error {
	p.sources = newSources(p.src, p.dst)
	looks := make([]*look, 0, len(items))
	for _, it := range items {
		l, err := p.look(ctx, it)
		if err != nil {
			return err
		}
		if l == nil {
			continue // skipped: the source refused it
		}
		if l.tree != nil {
			if err := p.listItem(ctx, l); err != nil {
				return err
			}
		}
		looks = append(looks, l)
	}
	if p.opts.DeleteExtra {
		if err := p.sources.addAncestors(ctx, items); err != nil {
			return err
		}
	}
	for _, l := range looks {
		if l.tree == nil {
			if err := p.mkdirs(ctx, l.exist, path.Dir(l.dst)); err != nil {
				return err
			}
			if err := p.decide(ctx, l.it.Src, l.dst, l.e, l.have, l.part); err != nil {
				return err
			}
			continue
		}
		if err := p.mkdirs(ctx, l.exist, l.it.Dst); err != nil {
			return err
		}
		p.root = &treeRoot{src: path.Clean(l.it.Src), dst: path.Clean(l.it.Dst)}
		err := p.place(ctx, l.tree, l.it.Dst, l.exists())
		p.root = nil
		if err != nil {
			return err
		}
	}
	return p.deleteStale(ctx)
}

// deleteStale deletes, pipelined, the temporary files leftOver noted. One
// the server refuses to delete stays: the next run of the file finds it.
func (p *planner) deleteStale(ctx context.Context) error {
	if len(p.stale) == 0 {
		return nil
	}
	cmds := make([]string, len(p.stale))
	for i, t := range p.stale {
		cmds[i] = "DELE " + t
	}
	if _, _, err := p.dst.DoAll(ctx, cmds); err != nil {
		return fmt.Errorf("delete temporary files at the destination: %w", err)
	}
	return nil
}

// exists reports whether a directory item's destination exists already.
func (l *look) exists() bool { return l.exist == path.Clean(l.it.Dst) }

// listItem lists a directory item's source tree and, when its destination
// exists, that directory at the same time: a copy into an existing
// directory pays no round trip more for it.
func (p *planner) listItem(ctx context.Context, l *look) error {
	if !l.exists() || p.opts.blind() {
		var err error
		l.tree, err = p.list(ctx, l.it.Src, l.it.Dst)
		return err
	}
	var err, derr error
	var des []gridftp.Entry
	both(func() { l.tree, err = p.list(ctx, l.it.Src, l.it.Dst) }, func() { des, derr = p.dst.List(ctx, l.it.Dst) })
	if err != nil || l.tree == nil {
		return err
	}
	if derr != nil && !isNotFound(derr) {
		return fmt.Errorf("list destination %s: %w", l.it.Dst, derr)
	}
	l.tree.dst, l.tree.dstListed = des, true
	return nil
}

// look looks up an item at both ends and refuses what cannot be copied
// (an *ItemError). A file's destination is resolved: into a directory
// that exists or that the path's trailing slash asks for. A source the
// copy skips (skipsSource) is no look and no error.
func (p *planner) look(ctx context.Context, it Item) (*look, error) {
	if p.sources.byUnique == nil {
		p.sources = newSources(p.src, p.dst)
	}
	// The destination and its ancestors in one round trip: whether it
	// exists, and from where directories must be made.
	// With them, the temporary names a file may have left there: as
	// it.Dst or in it.
	var e gridftp.Entry
	var err, lerr error
	var dstL lineage
	var parts []*gridftp.Entry
	both(func() { e, err = p.src.Stat(ctx, it.Src) }, func() {
		if p.opts.blind() {
			chain := ancestry(it.Dst)
			dstL = lineage{paths: chain, es: make([]gridftp.Entry, len(chain)), errs: slices.Repeat([]error{errBlind}, len(chain))}
			return
		}
		var more []string
		if p.tempNames() {
			more = []string{partname.For(path.Clean(it.Dst)), partname.For(path.Join(it.Dst, path.Base(it.Src)))}
		}
		dstL, parts, lerr = lookUp(ctx, p.dst, it.Dst, more...)
	})
	chain, des, derrs := dstL.paths, dstL.es, dstL.errs
	switch {
	case err != nil && p.skipsSource(it.Src, it.Dst, err):
		return nil, nil
	case isNotFound(err):
		return nil, &ItemError{Path: it.Src, Why: "no such file or directory", NotFound: true}
	case err != nil:
		return nil, fmt.Errorf("source %s: %w", it.Src, err)
	case lerr != nil:
		return nil, fmt.Errorf("destination %s: %w", it.Dst, lerr)
	}
	l := &look{it: it, e: e, exist: "/"}
	for i, d := range chain {
		if derrs[i] == nil {
			if i > 0 && !des[i].IsDir() {
				return nil, &ItemError{Path: d, Dest: true, Why: "is a file; a directory is needed there"}
			}
			l.exist = path.Clean(d)
			break
		}
	}
	de, derr := des[0], derrs[0]
	p.sources.add(it.Src, e)
	if e.IsDir() {
		if !p.opts.Recursive && !it.Recursive {
			return nil, &ItemError{Path: it.Src, Why: "is a directory: transfer it recursively"}
		}
		if derr == nil && !de.IsDir() {
			return nil, &ItemError{Path: it.Dst, Dest: true, Why: "is a file; a directory is needed there"}
		}
		if err := p.overlaps(ctx, it, dstL); err != nil {
			return nil, err
		}
		l.tree = &tree{}
		return l, nil
	}
	l.dst = it.Dst
	isDir := derr == nil && de.IsDir()
	switch {
	case isDir || strings.HasSuffix(it.Dst, "/"):
		if derr == nil && !isDir {
			return nil, &ItemError{Path: it.Dst, Dest: true, Why: "is a file; a directory is needed there"}
		}
		l.dst = path.Join(it.Dst, path.Base(it.Src))
		if isDir {
			if de, err := p.dst.Stat(ctx, l.dst); err == nil {
				l.have = &de
			}
		}
		if len(parts) > 1 {
			l.part = parts[1]
		}
	case derr == nil:
		l.have = &de
		fallthrough
	default:
		if len(parts) > 0 {
			l.part = parts[0]
		}
	}
	if !isDir && l.exist == path.Clean(it.Dst) {
		l.exist = path.Dir(l.dst) // the file itself exists: its directory does
	}
	if l.have != nil {
		if s, ok := p.sources.find(l.dst, *l.have); ok {
			return nil, &ItemError{Path: l.dst, Dest: true, Why: "is the source " + s + " itself"}
		}
	}
	return l, nil
}

// list lists a source directory and its subdirectories, writing nothing.
// A directory the server refuses to list fails alone.
func (p *planner) list(ctx context.Context, src, dst string) (*tree, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.dirs++
	entries, err := p.src.List(ctx, src)
	var refused *gridftp.Error
	if errors.As(err, &refused) {
		err = fmt.Errorf("list source directory: %w", err)
		if !p.skipsSource(src, dst, err) {
			p.failed = append(p.failed, FileResult{Src: src, Dst: dst, Outcome: Failed, Attempts: 1, Err: err})
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list source %s: %w", src, err)
	}
	t := &tree{src: src, subs: map[string]*tree{}, names: map[string]bool{}}
	for _, e := range entries {
		if !client.ListedName(e.Name) {
			continue // no server lists such names; a hostile one is ignored
		}
		if partname.Is(e.Name) {
			continue // a file a copy is writing (or left to resume): no user's data
		}
		t.names[e.Name] = true
		s, d := path.Join(src, e.Name), path.Join(dst, e.Name)
		p.sources.add(s, e)
		ok, err := included(p.opts.Filters, e)
		if err != nil {
			return nil, err
		}
		if !ok || p.opts.Skip != nil && p.opts.Skip(s, d) || !e.IsDir() && e.Type != "file" {
			continue
		}
		if e.IsDir() {
			sub, err := p.list(ctx, s, d)
			if err != nil {
				return nil, err
			}
			if sub == nil {
				continue
			}
			t.subs[e.Name] = sub
		}
		t.entries = append(t.entries, e)
	}
	return t, nil
}

// place creates a listed tree's directories at dst and decides its files.
// A destination directory that existed before (existed) is listed: for
// the sync level, for DeleteExtra, and to find entries that are sources.
func (p *planner) place(ctx context.Context, t *tree, dst string, existed bool) error {
	existing := map[string]gridftp.Entry{}
	if existed {
		des := t.dst
		if !t.dstListed {
			var err error
			if des, err = p.dst.List(ctx, dst); err != nil && !isNotFound(err) {
				return fmt.Errorf("list destination %s: %w", dst, err)
			}
		}
		for _, de := range des {
			if client.ListedName(de.Name) {
				existing[de.Name] = de
			}
		}
		if p.opts.DeleteExtra {
			if err := p.deleteExtra(ctx, t, dst, existing); err != nil {
				return err
			}
		}
	}
	same, err := p.sameSums(ctx, t, dst, existing)
	if err != nil {
		return err
	}
	var missing []string
	for _, e := range t.entries {
		if _, ok := existing[e.Name]; e.IsDir() && !ok {
			missing = append(missing, path.Join(dst, e.Name))
		}
	}
	made, err := p.mkdirAll(ctx, missing)
	if err != nil {
		return err
	}
	for _, e := range t.entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, d := path.Join(t.src, e.Name), path.Join(dst, e.Name)
		de, ok := existing[e.Name]
		if !e.IsDir() {
			var have, part *gridftp.Entry
			if ok {
				have = &de
				if eq, known := same[e.Name]; known {
					p.summed[d] = eq
				}
			}
			if pe, ok := existing[partname.For(e.Name)]; ok && p.tempNames() {
				part = &pe
			}
			if err := p.decide(ctx, s, d, e, have, part); err != nil {
				return err
			}
			continue
		}
		if ok && !de.IsDir() {
			p.failed = append(p.failed, FileResult{Src: s, Dst: d, Outcome: Failed, Attempts: 1,
				Err: &ItemError{Path: d, Dest: true, Why: "is a file; a directory is needed there"}})
			continue
		}
		if err := p.place(ctx, t.subs[e.Name], d, !made[d]); err != nil {
			return err
		}
	}
	return nil
}

// sameSums compares, for the sync level checksum, the files of a listed
// directory whose destination has the same size, by checksum lists
// computed at both ends at once (sums.go): a directory costs about a
// round trip, not one per file. A file either end cannot checksum is left out (decide
// asks again, and reports the failure).
func (p *planner) sameSums(ctx context.Context, t *tree, dst string, existing map[string]gridftp.Entry) (map[string]bool, error) {
	if p.opts.SyncLevel != SyncChecksum {
		return nil, nil
	}
	var names []string
	for _, e := range t.entries {
		if de, ok := existing[e.Name]; ok && !e.IsDir() && !de.IsDir() && de.Size == e.Size {
			names = append(names, e.Name)
		}
	}
	if len(names) < 2 {
		return nil, nil
	}
	var a, b []string
	var aerrs, berrs []error
	var aerr, berr error
	both(func() { a, aerrs, aerr = p.srcSums.sums(ctx, p.src, p.alg, t.src, names) },
		func() { b, berrs, berr = p.dstSums.sums(ctx, p.dst, p.alg, dst, names) })
	if err := errors.Join(aerr, berr); err != nil {
		return nil, fmt.Errorf("checksums in %s: %w", t.src, err)
	}
	if p.summed == nil {
		p.summed = map[string]bool{}
	}
	same := map[string]bool{}
	for i, n := range names {
		if aerrs[i] == nil && berrs[i] == nil {
			same[n] = a[i] == b[i]
		}
	}
	return same, nil
}

// tempNames reports whether files are written under temporary names: all
// but in place and behind a relay, which writes nothing of its own.
func (p *planner) tempNames() bool { return !p.opts.InPlace && !p.opts.blind() }

// decide skips or schedules one file by sync level. have is the file at
// the destination, part what an earlier run left under its temporary name
// (nil: none).
func (p *planner) decide(ctx context.Context, src, dst string, e gridftp.Entry, have, part *gridftp.Entry) error {
	if have != nil {
		if s, ok := p.sources.find(dst, *have); ok {
			p.failed = append(p.failed, FileResult{Src: src, Dst: dst, Size: e.Size, Outcome: Failed, Attempts: 1,
				Err: fmt.Errorf("%w (%s)", errSameFile, s)})
			return nil
		}
	}
	// No level skips a destination file of another size than its source:
	// a canceled or broken transfer may have left it short, under its
	// name, newer than its source.
	skip := false
	if have != nil && !have.IsDir() && have.Size == e.Size {
		switch p.opts.SyncLevel {
		case SyncExists, SyncSize:
			skip = true
		case SyncMtime:
			skip = !e.Modify.After(have.Modify)
		case SyncChecksum:
			if eq, known := p.summed[dst]; known {
				skip = eq
				delete(p.summed, dst)
			} else {
				a, b, err := checksums(ctx, p.src, p.dst, p.alg, src, dst, 0, -1)
				if err != nil {
					return err
				}
				skip = a == b
			}
		}
	}
	if skip {
		p.skipped = append(p.skipped, FileResult{Src: src, Dst: dst, Size: e.Size, Outcome: Skipped})
		p.leftOver(dst, part)
		return nil
	}
	f := &file{src: src, dst: dst, size: e.Size, mtime: e.Modify}
	if p.tempNames() {
		f.tmp = partname.For(dst)
	}
	if p.root != nil && p.root.under(src, dst) {
		f.root = p.root
	}
	if p.opts.Resume && have != nil && !have.IsDir() {
		done, err := p.resume(ctx, f, *have)
		if done {
			p.leftOver(dst, part)
		}
		if err != nil || done {
			return err
		}
	}
	if f.tmp != "" && part != nil && !part.IsDir() {
		var err error
		if f.restart, err = p.restartFrom(ctx, f, *part); err != nil {
			return err
		}
	} else if f.tmp == "" && p.opts.Resume && have != nil && !have.IsDir() {
		f.restart = p.recorded(f, *have)
	}
	p.files = append(p.files, f)
	return nil
}

// leftOver notes the temporary file (part, nil: none) of a file that is
// whole at dst: an earlier run's, of no more use; plan deletes them.
func (p *planner) leftOver(dst string, part *gridftp.Entry) {
	if part != nil && !part.IsDir() && p.tempNames() {
		p.stale = append(p.stale, partname.For(dst))
	}
}

// resume looks at what an interrupted run may have left of f at the
// destination (have): a whole copy, equal by checksum, is done and
// reported transferred.
func (p *planner) resume(ctx context.Context, f *file, have gridftp.Entry) (done bool, err error) {
	if have.Size != f.size {
		return false, nil
	}
	a, b, err := checksums(ctx, p.src, p.dst, p.alg, f.src, f.dst, 0, -1)
	if err != nil || a != b {
		return false, err
	}
	p.resumed = append(p.resumed, FileResult{Src: f.src, Dst: f.dst, Size: f.size, Outcome: Transferred,
		Checksum: p.alg + ":" + a, Attempts: 1})
	return true, nil
}

// recorded is what an earlier run reported at the destination of f
// (Options.Restart) and is still good: of the source as it still is, and
// within at, what holds its data.
func (p *planner) recorded(f *file, at gridftp.Entry) gridftp.Ranges {
	if p.opts.Restart == nil {
		return gridftp.Ranges{}
	}
	if r, ok := p.opts.Restart(f.src); ok && r.Size == f.size && r.Modify.Equal(f.mtime) && at.Size >= r.Have.End() {
		return r.Have
	}
	return gridftp.Ranges{}
}

// restartFrom is what of f the temporary file an earlier run left (part)
// holds and need not be sent again: the ranges that run reported
// (Options.Restart) of the source as it still is; else, when nothing was
// reported, the blocks whose checksums match the source's (goodBlocks). A
// temporary file of another version of the source, or longer than it, is
// written again from the start, as is a tree's (CopyMany): its head
// forwards the whole stream, and cannot seek.
func (p *planner) restartFrom(ctx context.Context, f *file, part gridftp.Entry) (gridftp.Ranges, error) {
	if part.Size > f.size || p.opts.fan != nil {
		return gridftp.Ranges{}, nil
	}
	if p.opts.Restart != nil {
		if _, ok := p.opts.Restart(f.src); ok {
			return p.recorded(f, part), nil
		}
	}
	return p.goodBlocks(ctx, f, part.Size)
}

// maxBlocks bounds the blocks goodBlocks compares: their checksums go
// pipelined, a round trip at each end at once.
const maxBlocks = client.PipelineDepth

// minBlock is the smallest block goodBlocks compares.
const minBlock = 4 << 20

// goodBlocks compares the first n bytes of f's temporary file with its
// source block by block, by checksums computed at both ends at once, and
// returns the blocks that match: a file with holes, even of full size, is
// sent again only where it differs. Without an algorithm both ends compute,
// nothing is trusted.
func (p *planner) goodBlocks(ctx context.Context, f *file, n int64) (gridftp.Ranges, error) {
	var good gridftp.Ranges
	if p.alg == "" || n == 0 {
		return good, nil
	}
	block := max(minBlock, (f.size+maxBlocks-1)/maxBlocks)
	var srcCmds, dstCmds []string
	for off := int64(0); off < n; off += block {
		l := min(block, n-off)
		srcCmds = append(srcCmds, fmt.Sprintf("CKSM %s %d %d %s", p.alg, off, l, f.src))
		dstCmds = append(dstCmds, fmt.Sprintf("CKSM %s %d %d %s", p.alg, off, l, f.tmp))
	}
	var a, b []gridftp.Reply
	var aerrs, berrs []error
	var aerr, berr error
	both(func() { a, aerrs, aerr = p.src.DoAll(ctx, srcCmds) }, func() { b, berrs, berr = p.dst.DoAll(ctx, dstCmds) })
	if err := errors.Join(aerr, berr); err != nil {
		return good, fmt.Errorf("checksums of %s's blocks: %w", f.src, err)
	}
	for i := range srcCmds {
		if aerrs[i] == nil && berrs[i] == nil && strings.EqualFold(strings.TrimSpace(a[i].Text()), strings.TrimSpace(b[i].Text())) {
			off := int64(i) * block
			good.Add(off, min(off+block, n))
		}
	}
	return good, nil
}

// mkdir creates d at the destination; made is false when it existed.
func (p *planner) mkdir(ctx context.Context, d string) (made bool, err error) {
	m, err := p.mkdirAll(ctx, []string{d})
	return m[d], err
}

// mkdirAll creates the directories ds, pipelined: a directory's
// subdirectories cost about a round trip. It says which it made; one that
// the server refused to make but that exists (made meanwhile) is fine.
func (p *planner) mkdirAll(ctx context.Context, ds []string) (made map[string]bool, err error) {
	made = map[string]bool{}
	if len(ds) == 0 || p.opts.blind() {
		for _, d := range ds {
			made[d] = true // a relay's child makes them (stack/forward)
		}
		return made, nil
	}
	cmds := make([]string, len(ds))
	for i, d := range ds {
		cmds[i] = "MKD " + d
	}
	_, errs, err := p.dst.DoAll(ctx, cmds)
	if err != nil {
		return nil, fmt.Errorf("create directory %s: %w", ds[0], err)
	}
	var refused []string
	for i, d := range ds {
		if errs[i] == nil {
			made[d] = true
		} else {
			refused = append(refused, d)
		}
	}
	if len(refused) == 0 {
		return made, nil
	}
	es, serrs, err := p.dst.StatAll(ctx, refused)
	if err != nil {
		return nil, err
	}
	for i, d := range refused {
		if serrs[i] != nil || !es[i].IsDir() {
			return nil, fmt.Errorf("create directory %s: %w", d, errs[slices.Index(ds, d)])
		}
	}
	return made, nil
}

// mkdirs creates the directories from below exist (which exists) down to
// d at the destination.
func (p *planner) mkdirs(ctx context.Context, exist, d string) error {
	d = path.Clean(d)
	if p.opts.blind() || d == exist || d == "/" || d == "." || !strings.HasPrefix(d, strings.TrimSuffix(exist, "/")+"/") {
		return nil
	}
	if err := p.mkdirs(ctx, exist, path.Dir(d)); err != nil {
		return err
	}
	_, err := p.mkdir(ctx, d)
	return err
}

// stat looks up sp at the source and, at the same time, dp at the
// destination; dp "" is not looked up.
func stat(ctx context.Context, src, dst *client.Conn, sp, dp string) (se, de gridftp.Entry, serr, derr error) {
	if dp == "" {
		se, serr = src.Stat(ctx, sp)
		return se, de, serr, derr
	}
	both(func() { se, serr = src.Stat(ctx, sp) }, func() { de, derr = dst.Stat(ctx, dp) })
	return se, de, serr, derr
}

// checksums computes alg over a range at both ends at once.
func checksums(ctx context.Context, src, dst *client.Conn, alg, sp, dp string, off, n int64) (string, string, error) {
	var a, b string
	var aerr, berr error
	both(func() { a, aerr = src.Checksum(ctx, alg, sp, off, n) }, func() { b, berr = dst.Checksum(ctx, alg, dp, off, n) })
	if aerr != nil {
		return "", "", fmt.Errorf("source checksum: %w", aerr)
	}
	if berr != nil {
		return "", "", fmt.Errorf("destination checksum: %w", berr)
	}
	return a, b, nil
}

// preferred is the order in which checksum algorithms are chosen: fast
// ones first, then those every GridFTP server has.
var preferred = []string{"XXH128", "CRC32C", "MD5", "ADLER32", "SHA1", "SHA256", "SHA512"}

// chooseAlgorithm picks what both ends compute.
func chooseAlgorithm(want string, a, b []string) (string, error) {
	has := func(list []string, n string) bool {
		for _, x := range list {
			if strings.EqualFold(x, n) {
				return true
			}
		}
		return false
	}
	if want != "" {
		want = strings.ToUpper(want)
		if !has(a, want) || !has(b, want) {
			return "", fmt.Errorf("checksum algorithm %s is not offered by both endpoints", want)
		}
		return want, nil
	}
	for _, n := range preferred {
		if has(a, n) && has(b, n) {
			return n, nil
		}
	}
	if len(a) == 0 && len(b) == 0 {
		return "MD5", nil // servers that hide FEAT CKSM usually still compute MD5
	}
	return "", errors.New("the endpoints share no checksum algorithm")
}
