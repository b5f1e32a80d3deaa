package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
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
	unreported int64          // of moved, those left to its FileResult (memberMoved)
	restart    gridftp.Ranges // at the destination from an earlier run (Options.Restart)
	chunks     gridftp.Ranges // chunks done
	sum        string
	root       *treeRoot // the listed tree it is in, by the same name below both roots; nil: none
	kept       bool      // ended and kept for settleTemps
}

// at is where f's data is written: its temporary name, or its final one.
func (f *file) at() string {
	if f.tmp != "" {
		return f.tmp
	}
	return f.dst
}

// planner lists sources and destinations and decides what to move, as a
// stream: a directory is listed, its destination directory made, its
// files decided and handed on in windows (emit) while the next
// directories are listed. It holds one directory's listing per level of
// the walk, and the window not yet handed on; no record of the tree, of
// the plan or of what is done.
//
// Safety with bounded memory: every item is looked up at both ends before
// anything is written, and a destination that is a source, lies inside it
// or holds it through any path the ends resolve is refused or, when it
// holds it, makes the copy list every source first (whole). A source
// directory that is the destination's root, or one of its own ancestors
// (a symlink loop), is not walked; a file is compared with the
// destination entry of its name (sources.same), and a destination
// directory that is a source directory listed before keeps its files.
// Every write goes to a temporary name renamed into place, so a
// destination file that is a hard link of a source file is replaced, never
// written through; only in place (Options.InPlace) would it be, and then
// the copy lists every source first.
type planner struct {
	src, dst *client.Conn
	opts     Options
	alg      string
	// The window: files to move, and outcomes settled while planning
	// (skipped, failed, resumed, skipped for source errors), until flush
	// hands them on.
	files  []*file
	done   []FileResult
	emit   func(context.Context, window) error // nil: nothing is handed on (Check)
	hungry func() bool                         // the workers have nothing queued
	// redial replaces the planning session at one end (dst), broken; nil:
	// none is dialed again.
	redial func(ctx context.Context, dst bool) (*client.Conn, error)
	// While src lists a directory (listing), the planner's other commands
	// at the source go to aux, dialed by dialSrc when first needed.
	listing bool
	aux     *client.Conn
	dialSrc func(ctx context.Context) (*client.Conn, error)
	// Listings ahead (lookAhead), the pools of sessions they run on at
	// the source and at the destination (nil: none), and the listings
	// running.
	aheads  map[aheadKey]*ahead
	pools   [2]*pool
	listers sync.WaitGroup
	dirs    int     // directories walked
	deleted int     // paths deleteExtra deleted
	deleter Deleter // told of each; nil: none
	sources sources
	// whole: every source entry was recorded (recordAll) before anything
	// was written; a directory not recorded then is not walked.
	whole   bool
	root    *treeRoot      // the tree being placed
	dstRoot *gridftp.Entry // its destination directory, when known
	// summed holds, by destination, whether the checksums of a directory's
	// files (sameSums) matched at both ends, until decide takes it.
	summed           map[string]bool
	srcSums, dstSums *sumEnd  // how each end computes checksum lists
	stale            []string // temporary files of files whole at the destination (leftOver)
}

// window is what the planner hands on at once: files to move, outcomes
// it settled, the directories walked so far, and whether it is the last.
type window struct {
	files []*file
	done  []FileResult
	dirs  int
	last  bool
}

// Windows: the planner hands on what it decided when windowFiles files
// are decided, before it lists a directory while the workers have nothing
// queued (the first files of a tree move while the rest is listed,
// however slow the listings), and at the end. The copier admits at most
// maxLive files not yet final: about half a KiB each with their units, a
// few MiB in all, and four windows keep every session pair busy while the
// next directories are listed; the planner waits for room
// (back-pressure).
const (
	windowFiles = 4096
	maxLive     = 4 * windowFiles
)

// look is one item looked up at both ends, before anything is written.
type look struct {
	it   Item
	e    gridftp.Entry // the source
	dst  string        // where a file goes; a directory's destination is it.Dst
	have *gridftp.Entry
	part *gridftp.Entry // a file's temporary name at the destination, left by an earlier run
	// A directory: whether it is one, the nearest existing
	// ancestor-or-self of its destination (mkdirs creates what lies below
	// it), the destination's entry when it exists, and whether the
	// destination holds the source (overlap).
	dir   bool
	exist string
	dstE  *gridftp.Entry
	holds bool
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

// plan expands items into files as a stream (see planner): it looks up
// every item, then walks each, handing on windows as it goes.
func (p *planner) plan(ctx context.Context, items []Item) error {
	p.sources = newSources(p.src, p.dst)
	defer func() {
		if p.aux != nil {
			p.aux.Close()
			p.aux = nil
		}
		p.closeListers()
	}()
	looks := make([]*look, 0, len(items))
	for _, it := range items {
		l, err := p.look(ctx, it)
		if err != nil {
			return err
		}
		if l != nil {
			looks = append(looks, l)
		}
	}
	if p.opts.DeleteExtra {
		if err := p.sources.addAncestors(ctx, items); err != nil {
			return err
		}
	}
	if wholeFirst(looks, p.opts.InPlace) {
		p.whole = true
		for _, l := range looks {
			if l.dir {
				if err := p.recordAll(ctx, l.it.Src, l.it.Dst, []gridftp.Entry{l.e}); err != nil {
					return err
				}
			}
		}
	}
	for _, l := range looks {
		if !l.dir {
			if err := p.mkdirs(ctx, l.exist, path.Dir(l.dst)); err != nil {
				return err
			}
			if err := p.decide(ctx, l.it.Src, l.dst, l.e, l.have, l.part, false); err != nil {
				return err
			}
			continue
		}
		if err := p.walkItem(ctx, l); err != nil {
			return err
		}
	}
	if err := p.deleteStale(ctx); err != nil {
		return err
	}
	return p.flush(ctx, true)
}

// wholeFirst reports whether the sources must all be listed before
// anything is written: in place, where a destination file that is a hard
// link of a source file would be written through; when a directory
// item's destination holds its source; and when an item's destination
// and another item's source overlap by their paths.
func wholeFirst(looks []*look, inPlace bool) bool {
	for i, l := range looks {
		if !l.dir {
			continue
		}
		if inPlace || l.holds {
			return true
		}
		for j, m := range looks {
			if i != j && (within(l.it.Dst, m.it.Src) || within(m.it.Src, l.it.Dst) || within(m.dst, l.it.Src)) {
				return true
			}
		}
	}
	return false
}

// within reports whether p is d or lies below it.
func within(p, d string) bool {
	if p == "" || d == "" {
		return false
	}
	p, d = path.Clean(p), path.Clean(d)
	return p == d || d == "/" || strings.HasPrefix(p, d+"/")
}

// recordAll lists the source tree src (its destination dst), every
// directory the walk would enter, and records every entry as a source;
// up are the directories above, for loops.
func (p *planner) recordAll(ctx context.Context, src, dst string, up []gridftp.Entry) error {
	entries, err := p.src.List(ctx, src)
	if err != nil {
		var refused *gridftp.Error
		if errors.As(err, &refused) {
			return nil // the walk reports it
		}
		return fmt.Errorf("list source %s: %w", src, err)
	}
	for _, e := range entries {
		if !client.ListedName(e.Name) || partname.Is(e.Name) {
			continue
		}
		s, d := path.Join(src, e.Name), path.Join(dst, e.Name)
		p.sources.add(s, e)
		if !e.IsDir() {
			continue
		}
		if ok, err := p.keeps(s, d, e); err != nil || !ok || loops(up, e) {
			if err != nil {
				return err
			}
			continue
		}
		if err := p.recordAll(ctx, s, d, append(up, e)); err != nil {
			return err
		}
	}
	return nil
}

// keeps reports whether the walk takes the listed entry e at s (to d):
// the filters and Options.Skip keep it, and it is a file or a directory.
func (p *planner) keeps(s, d string, e gridftp.Entry) (bool, error) {
	ok, err := included(p.opts.Filters, e)
	if err != nil || !ok || p.opts.Skip != nil && p.opts.Skip(s, d) {
		return false, err
	}
	return e.IsDir() || e.Type == "file", nil
}

// loops reports whether the directory e is one of the directories above
// it (up): a symlink loop, or a bind mount of an ancestor.
func loops(up []gridftp.Entry, e gridftp.Entry) bool {
	if e.Unique == "" {
		return false
	}
	for _, u := range up {
		if u.Unique == e.Unique {
			return true
		}
	}
	return false
}

// walkItem walks a directory item: its destination is made once its
// source's first window is listed (a directory of fewer than listWindow
// entries is listed whole first: a destination inside it that the ends
// cannot tell apart is not in that listing).
func (p *planner) walkItem(ctx context.Context, l *look) error {
	p.root = &treeRoot{src: path.Clean(l.it.Src), dst: path.Clean(l.it.Dst)}
	p.dstRoot = l.dstE
	first := func() error {
		if err := p.mkdirs(ctx, l.exist, l.it.Dst); err != nil {
			return err
		}
		if p.dstRoot == nil && p.sources.sameHost && !p.opts.blind() {
			if de, err := p.dst.Stat(ctx, l.it.Dst); err == nil {
				p.dstRoot = &de
			}
		}
		return nil
	}
	err := p.walkDir(ctx, l.it.Src, l.it.Dst, l.exists(), []gridftp.Entry{l.e}, false, first)
	p.root, p.dstRoot = nil, nil
	return err
}

// flush hands the window on (last: the plan is done), and deletes the
// stale temporary files noted so far when they are many.
func (p *planner) flush(ctx context.Context, last bool) error {
	if len(p.stale) >= windowFiles {
		if err := p.deleteStale(ctx); err != nil {
			return err
		}
	}
	if p.emit == nil || len(p.files) == 0 && len(p.done) == 0 {
		return nil
	}
	w := window{files: p.files, done: p.done, dirs: p.dirs, last: last}
	p.files, p.done = nil, nil
	return p.emit(ctx, w)
}

// flushFull hands the window on when it is full.
func (p *planner) flushFull(ctx context.Context) error {
	if len(p.files)+len(p.done) >= windowFiles {
		return p.flush(ctx, false)
	}
	return nil
}

// flushHungry hands the window on when the workers have nothing queued,
// before a listing that may take a while.
func (p *planner) flushHungry(ctx context.Context) error {
	if len(p.files)+len(p.done) > 0 && p.hungry != nil && p.hungry() {
		return p.flush(ctx, false)
	}
	return nil
}

// settled records an outcome the planner decided.
func (p *planner) settled(r FileResult) { p.done = append(p.done, r) }

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
	p.stale = p.stale[:0]
	if _, _, err := p.dst.DoAll(ctx, cmds); err != nil {
		return fmt.Errorf("delete temporary files at the destination: %w", err)
	}
	return nil
}

// exists reports whether a directory item's destination exists already.
func (l *look) exists() bool { return l.exist == path.Clean(l.it.Dst) }

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
				return nil, &ItemError{Path: d, Dest: true, Why: notDir(des[i])}
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
			return nil, &ItemError{Path: it.Dst, Dest: true, Why: notDir(de)}
		}
		holds, err := p.overlaps(ctx, it, dstL)
		if err != nil {
			return nil, err
		}
		l.dir, l.holds = true, holds
		if derr == nil {
			l.dstE = &de
		}
		return l, nil
	}
	l.dst = it.Dst
	isDir := derr == nil && de.IsDir()
	switch {
	case isDir || strings.HasSuffix(it.Dst, "/"):
		if derr == nil && !isDir {
			return nil, &ItemError{Path: it.Dst, Dest: true, Why: notDir(de)}
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

// Huge directories: a source directory is listed as a stream (ListEach)
// and placed in windows of listWindow entries; one of fewer entries is
// listed whole before anything of it is written. A destination directory
// is listed into a map while it has at most hugeDir entries; a larger one
// is not held: the names of each window are looked up there (StatAll,
// pipelined). The source's names are kept for DeleteExtra up to hugeDir
// too; past that, the destination's listing is streamed and its names
// looked up at the source in windows.
// (Variables: tests make them small.)
var (
	listWindow = 10_000
	hugeDir    = 100_000
)

// errHuge stops a listing that outgrew hugeDir entries.
var errHuge = errors.New("more than hugeDir entries")

// walk is the walk of one source directory: where it goes, what the
// destination has there, and what it found so far.
type walk struct {
	src, dst string
	up       []gridftp.Entry // the source directories above and src itself, for loops
	srcDir   bool            // the destination directory is a source directory
	existed  bool            // the destination directory existed
	// The destination's listing when it existed and was small; nil and
	// huge when it was large (its names are looked up per window).
	existing map[string]gridftp.Entry
	huge     bool
	// Every name the source listed (an excluded name is not extra), for
	// DeleteExtra; nil past hugeDir names.
	names  map[string]bool
	listed int
	pruned bool // DeleteExtra deleted the extra entries
	subs   []sub
	ready  func() error // waits for the destination's listing; then nil
}

// sub is a subdirectory a walk enters after its directory's files: its
// source entry, its destination's when that existed, and whether the
// walk made it.
type sub struct {
	e, de     gridftp.Entry
	had, made bool
}

// walkDir lists the source directory src and places it at dst (which
// existed before, or not): it deletes what the destination has that the
// source does not (DeleteExtra), creates the subdirectories, decides the
// files, window by window, and then walks the subdirectories. up are the
// source directories above src and src itself; srcDir says the
// destination directory is itself a source directory, whose files are
// never written. first runs before anything is written (nil: nothing).
// A directory the source refuses to list fails alone.
func (p *planner) walkDir(ctx context.Context, src, dst string, existed bool, up []gridftp.Entry, srcDir bool, first func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.flushHungry(ctx); err != nil {
		return err
	}
	p.dirs++
	w := &walk{src: src, dst: dst, up: up, srcDir: srcDir, existed: existed, names: map[string]bool{}}
	w.ready = func() error { return nil }
	if existed && !p.opts.blind() {
		done := make(chan error, 1)
		a := p.claimAhead(aheadKey{true, dst})
		go func() { done <- p.listDst(ctx, w, a) }()
		w.ready = func() error {
			err := <-done
			w.ready = func() error { return err }
			return err
		}
	}
	var buf []gridftp.Entry
	placed := false
	var perr error // placing a window failed: not the listing's fault
	put := func() error {
		if !placed && first != nil {
			if perr = first(); perr != nil {
				return perr
			}
		}
		placed = true
		perr = p.placeWindow(ctx, w, buf)
		buf = buf[:0]
		return perr
	}
	each := func(e gridftp.Entry) error {
		if !client.ListedName(e.Name) || partname.Is(e.Name) {
			return nil // no server lists such names / a file a copy is writing: no user's data
		}
		w.listed++
		if w.names != nil {
			w.names[e.Name] = true
			if len(w.names) > hugeDir {
				w.names = nil
			}
		}
		s := path.Join(src, e.Name)
		if e.IsDir() {
			p.sources.add(s, e)
		}
		ok, err := p.keeps(s, path.Join(dst, e.Name), e)
		if err != nil || !ok {
			return err
		}
		buf = append(buf, e)
		if len(buf) >= listWindow {
			return put()
		}
		return nil
	}
	var err error
	if es, ok := p.claimAhead(aheadKey{false, src}).wait(ctx); ok {
		for _, e := range es {
			if err = each(e); err != nil {
				break
			}
		}
	} else {
		err = p.listAt(ctx, false, src, each, func() bool { return placed })
	}
	if derr := w.ready(); derr != nil && perr == nil {
		return derr
	}
	var refused *gridftp.Error
	switch {
	case perr != nil:
		return perr
	case errors.As(err, &refused) || err != nil && placed && ctx.Err() == nil:
		err = fmt.Errorf("list source directory: %w", err)
		if !p.skipsSource(src, dst, err) {
			p.settled(FileResult{Src: src, Dst: dst, Outcome: Failed, Attempts: 1, Err: err})
		}
		return nil
	case err != nil:
		return fmt.Errorf("list source %s: %w", src, err)
	}
	if len(buf) > 0 || !placed {
		if err := put(); err != nil {
			return err
		}
	}
	if w.existed && p.opts.DeleteExtra && !w.srcDir && !w.pruned {
		if err := p.deleteExtra(ctx, w); err != nil {
			return err
		}
	}
	return p.walkSubs(ctx, w)
}

// listAt lists the directory name at the source, or at the destination
// (dst), calling fn with each entry as it arrives, and lists it again
// after a failure a retry may mend (not fault.Final: a reply on the way,
// or a broken session, which it dials afresh: redial) after a backoff, as
// a transfer is tried again, while nothing of it was used (used): a
// listing that breaks costs that directory, not the tree.
func (p *planner) listAt(ctx context.Context, dst bool, name string, fn func(gridftp.Entry) error, used func() bool) error {
	b := fault.Backoff{Base: p.opts.Backoff, Max: p.opts.MaxBackoff}
	for try := 1; ; try++ {
		conn := p.src
		if dst {
			conn = p.dst
		}
		if !dst {
			p.listing = true
		}
		err := conn.ListEach(ctx, name, fn)
		if !dst {
			p.listing = false
		}
		if err == nil || used() || try >= p.opts.maxAttempts() || fault.Final(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(b.Next()):
		case <-ctx.Done():
			return ctx.Err()
		}
		if !errors.As(err, new(*gridftp.Error)) && p.redial != nil {
			c, derr := p.redial(ctx, dst)
			if derr != nil {
				return errors.Join(err, derr)
			}
			if dst {
				p.dst = c
			} else {
				p.src = c
			}
		}
	}
}

// listDst lists the destination directory of w into w.existing (or takes
// its listing made ahead, a), or, past hugeDir entries, notes it huge: its
// names are looked up per window.
func (p *planner) listDst(ctx context.Context, w *walk, dstAhead *ahead) error {
	w.existing = map[string]gridftp.Entry{}
	each := func(de gridftp.Entry) error {
		if !client.ListedName(de.Name) {
			return nil
		}
		w.existing[de.Name] = de
		if len(w.existing) > hugeDir {
			return errHuge
		}
		return nil
	}
	var err error
	if es, ok := dstAhead.wait(ctx); ok {
		for _, de := range es {
			if err = each(de); err != nil {
				break
			}
		}
	} else {
		err = p.listAt(ctx, true, w.dst, each, func() bool { return false })
	}
	switch {
	case errors.Is(err, errHuge):
		w.existing, w.huge = nil, true
	case err != nil && !isNotFound(err):
		return fmt.Errorf("list destination %s: %w", w.dst, err)
	}
	return nil
}

// srcOps is the session for the planner's commands at the source: its
// own, or, while that lists a directory, a second one dialed for them.
func (p *planner) srcOps(ctx context.Context) (*client.Conn, error) {
	if !p.listing {
		return p.src, nil
	}
	if p.aux == nil {
		if p.dialSrc == nil {
			return nil, errors.New("no session for commands while listing")
		}
		c, err := p.dialSrc(ctx)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		p.aux = c
	}
	return p.aux, nil
}

// placeWindow places a window of a directory's listed entries: it looks
// their names up at the destination (in its listing, or, huge, there),
// creates the missing subdirectories, and decides the files; the
// subdirectories are noted for walkSubs.
func (p *planner) placeWindow(ctx context.Context, w *walk, es []gridftp.Entry) error {
	if err := w.ready(); err != nil {
		return err
	}
	existing := w.existing
	if w.huge {
		var err error
		if existing, err = p.lookNames(ctx, w.dst, es); err != nil {
			return err
		}
	}
	if existing == nil {
		existing = map[string]gridftp.Entry{}
	}
	if w.existed && p.opts.DeleteExtra && !w.srcDir && w.names != nil && w.listed < listWindow {
		// A directory listed whole: what the source does not have goes
		// first, before anything is written there.
		if err := p.deleteExtra(ctx, w); err != nil {
			return err
		}
		w.pruned = true
	}
	same, err := p.sameSums(ctx, w.src, es, w.dst, existing)
	if err != nil {
		return err
	}
	var missing []string
	for _, e := range es {
		if _, ok := existing[e.Name]; e.IsDir() && !ok {
			missing = append(missing, path.Join(w.dst, e.Name))
		}
	}
	made, err := p.mkdirAll(ctx, missing)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, dd := path.Join(w.src, e.Name), path.Join(w.dst, e.Name)
		de, ok := existing[e.Name]
		if e.IsDir() {
			if ok && !de.IsDir() {
				p.settled(FileResult{Src: s, Dst: dd, Outcome: Failed, Attempts: 1,
					Err: &ItemError{Path: dd, Dest: true, Why: notDir(de)}})
				continue
			}
			w.subs = append(w.subs, sub{e: e, de: de, had: ok, made: made[dd]})
			continue
		}
		var have, part *gridftp.Entry
		if ok {
			have = &de
			if eq, known := same[e.Name]; known {
				p.summed[dd] = eq
			}
		}
		if pe, ok := existing[partname.For(e.Name)]; ok && p.tempNames() {
			part = &pe
		}
		if err := p.decide(ctx, s, dd, e, have, part, w.srcDir); err != nil {
			return err
		}
		if err := p.flushFull(ctx); err != nil {
			return err
		}
	}
	return nil
}

// lookNames looks the names of es up in the destination directory dst,
// with their temporary names, pipelined, and returns what exists.
func (p *planner) lookNames(ctx context.Context, dst string, es []gridftp.Entry) (map[string]gridftp.Entry, error) {
	names := make([]string, 0, 2*len(es))
	for _, e := range es {
		names = append(names, e.Name)
		if !e.IsDir() && p.tempNames() {
			names = append(names, partname.For(e.Name))
		}
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = path.Join(dst, n)
	}
	des, errs, err := p.dst.StatAll(ctx, paths)
	if err != nil {
		return nil, fmt.Errorf("look up in destination %s: %w", dst, err)
	}
	found := map[string]gridftp.Entry{}
	for i, n := range names {
		if errs[i] == nil {
			de := des[i]
			de.Name = n
			found[n] = de
		}
	}
	return found, nil
}

// Listings ahead: while the walk places a directory, the listings of the
// subdirectories it enters next (up to listers of them), and of their
// destinations that exist, are made on sessions of their own, a pool at
// each end that the planner dials as it needs (on a WAN each listing
// costs round trips: several are in flight). A listing made ahead holds at
// most listWindow entries; a larger directory is listed again when the
// walk gets to it, as a stream. The walk's order is the same as without
// them.
const listers = 4

// ahead is a listing made ahead of the walk.
type ahead struct {
	done chan struct{}
	es   []gridftp.Entry
	err  error // errHuge: too large to hold; the walk lists it itself
}

// aheadKey names a listing ahead: a directory at the source, or at the
// destination (dst).
type aheadKey struct {
	dst  bool
	path string
}

// pool is the sessions for listings ahead at one end: idle ones, a slot
// for each session in use, and how to dial another.
type pool struct {
	idle  chan *client.Conn
	slots chan struct{}
	dial  func(context.Context) (*client.Conn, error)
}

// lookAhead starts the listings ahead of keys, those not yet started.
func (p *planner) lookAhead(ctx context.Context, keys []aheadKey) {
	for _, k := range keys {
		pl := p.pools[0]
		if k.dst {
			pl = p.pools[1]
		}
		if _, ok := p.aheads[k]; ok || pl == nil {
			continue
		}
		if p.aheads == nil {
			p.aheads = map[aheadKey]*ahead{}
		}
		a := &ahead{done: make(chan struct{})}
		p.aheads[k] = a
		p.listers.Add(1)
		go func() {
			defer p.listers.Done()
			defer close(a.done)
			select {
			case pl.slots <- struct{}{}:
			case <-ctx.Done():
				a.err = ctx.Err()
				return
			}
			defer func() { <-pl.slots }()
			var conn *client.Conn
			select {
			case conn = <-pl.idle:
			default:
				if conn, a.err = pl.dial(ctx); a.err != nil {
					return
				}
			}
			a.err = conn.ListEach(ctx, k.path, func(e gridftp.Entry) error {
				if len(a.es) >= listWindow {
					return errHuge
				}
				a.es = append(a.es, e)
				return nil
			})
			if a.err != nil {
				a.es = nil
			}
			var refused *gridftp.Error
			if a.err != nil && !errors.Is(a.err, errHuge) && !errors.As(a.err, &refused) {
				conn.Close() // broken: the walk lists it itself
				return
			}
			pl.idle <- conn
		}()
	}
}

// claimAhead takes the listing of k made ahead, if any (nil: none).
func (p *planner) claimAhead(k aheadKey) *ahead {
	a := p.aheads[k]
	delete(p.aheads, k)
	return a
}

// wait waits for a listing ahead (nil: none) and returns its entries, or
// false when there are none to use (the walk lists the directory).
func (a *ahead) wait(ctx context.Context) ([]gridftp.Entry, bool) {
	if a == nil {
		return nil, false
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, false
	}
	return a.es, a.err == nil
}

// newPool is a pool of sessions dialed by dial; nil without one.
func newPool(dial func(context.Context) (*client.Conn, error)) *pool {
	if dial == nil {
		return nil
	}
	return &pool{idle: make(chan *client.Conn, listers), slots: make(chan struct{}, listers), dial: dial}
}

// closeListers waits for the listings ahead and closes their sessions.
func (p *planner) closeListers() {
	p.listers.Wait()
	for _, pl := range p.pools {
		for pl != nil && len(pl.idle) > 0 {
			(<-pl.idle).Close()
		}
	}
}

// walkSubs walks the subdirectories of w.
func (p *planner) walkSubs(ctx context.Context, w *walk) error {
	subs := w.subs
	w.subs, w.existing, w.names = nil, nil, nil // what the walk below needs is in subs
	for i, sd := range subs {
		if len(subs) > 1 {
			var next []aheadKey
			for _, n := range subs[i+1 : min(i+1+listers, len(subs))] {
				next = append(next, aheadKey{false, path.Join(w.src, n.e.Name)})
				if !n.made && !p.opts.blind() {
					next = append(next, aheadKey{true, path.Join(w.dst, n.e.Name)})
				}
			}
			p.lookAhead(ctx, next)
		}
		s, dd := path.Join(w.src, sd.e.Name), path.Join(w.dst, sd.e.Name)
		switch {
		case loops(w.up, sd.e):
			p.settled(FileResult{Src: s, Dst: dd, Outcome: Failed, Attempts: 1,
				Err: &ItemError{Path: s, Why: "is a directory above it (a symlink loop): not walked again"}})
			continue
		case p.dstRoot != nil && p.sources.same(s, sd.e, p.root.dst, *p.dstRoot):
			continue // the destination, inside its source: not walked
		case p.whole && !p.sources.paths[s]:
			continue // made after the sources were listed: the copy's own
		}
		_, isSrc := p.sources.find(dd, sd.de)
		if err := p.walkDir(ctx, s, dd, !sd.made, append(w.up[:len(w.up):len(w.up)], sd.e), sd.had && isSrc, nil); err != nil {
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
func (p *planner) sameSums(ctx context.Context, srcDir string, es []gridftp.Entry, dst string, existing map[string]gridftp.Entry) (map[string]bool, error) {
	if p.opts.SyncLevel != synclevel.Checksum {
		return nil, nil
	}
	var names []string
	for _, e := range es {
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
	src, err := p.srcOps(ctx)
	if err != nil {
		return nil, err
	}
	both(func() { a, aerrs, aerr = p.srcSums.sums(ctx, src, p.alg, srcDir, names) },
		func() { b, berrs, berr = p.dstSums.sums(ctx, p.dst, p.alg, dst, names) })
	if err := errors.Join(aerr, berr); err != nil {
		return nil, fmt.Errorf("checksums in %s: %w", srcDir, err)
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
func (p *planner) decide(ctx context.Context, src, dst string, e gridftp.Entry, have, part *gridftp.Entry, srcDir bool) error {
	if have != nil {
		s, ok := p.sources.find(dst, *have)
		if !ok && (srcDir || p.sources.same(src, e, dst, *have)) {
			s, ok = dst, true
		}
		if ok {
			p.settled(FileResult{Src: src, Dst: dst, Size: e.Size, Outcome: Failed, Attempts: 1,
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
		case synclevel.Exists, synclevel.Size:
			skip = true
		case synclevel.Mtime:
			skip = !e.Modify.After(have.Modify)
		case synclevel.Checksum:
			if eq, known := p.summed[dst]; known {
				skip = eq
				delete(p.summed, dst)
			} else {
				conn, err := p.srcOps(ctx)
				if err != nil {
					return err
				}
				a, b, err := checksums(ctx, conn, p.dst, p.alg, src, dst, 0, -1)
				if err != nil {
					return err
				}
				skip = a == b
			}
		}
	}
	if skip {
		p.settled(FileResult{Src: src, Dst: dst, Size: e.Size, Outcome: Skipped})
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
	src, err := p.srcOps(ctx)
	if err != nil {
		return false, err
	}
	a, b, err := checksums(ctx, src, p.dst, p.alg, f.src, f.dst, 0, -1)
	if err != nil || a != b {
		return false, err
	}
	p.settled(FileResult{Src: f.src, Dst: f.dst, Size: f.size, Outcome: Transferred,
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
	src, err := p.srcOps(ctx)
	if err != nil {
		return good, err
	}
	both(func() { a, aerrs, aerr = src.DoAll(ctx, srcCmds) }, func() { b, berrs, berr = p.dst.DoAll(ctx, dstCmds) })
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

// notDir says why an entry where a directory is needed will not do: it is
// a file, or a symbolic link that the server does not follow (it leads out
// of the server's root, dangles or loops).
func notDir(e gridftp.Entry) string {
	if e.Type == "OS.unix=slink" {
		return "is a symbolic link that ferry does not follow; a directory is needed there"
	}
	return "is a file; a directory is needed there"
}
