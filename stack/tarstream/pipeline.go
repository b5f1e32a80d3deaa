package tarstream

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"ferry/storage"
)

// A pipeline hands a reading layer the members of a transfer in order,
// each prepared (opened and its start read, or hashed) by one of inFlight
// workers ahead of the one the layer is at, so that the latency of one
// file overlaps the work on others. Its goroutines live as long as the
// transfer: a producer that lists the members (or walks the tree) and the
// workers.

// inFlight is how many members are prepared at once, and how many more
// wait prepared for their turn.
const inFlight = 4

// item is one member on its way through a pipeline.
type item struct {
	name   string       // as reported: as named in Members, or relative to the path
	rel    string       // cleaned, relative to the transfer's path
	info   storage.Info // as listed, when stated
	stated bool
	dir    *dirRef       // the directory it is in, while it is prepared
	ready  chan struct{} // closed once prepared

	// What preparing it found.
	err   error
	f     storage.File // still open: the file is longer than buf
	buf   *[]byte      // pooled: its first bytes
	n     int          // bytes in buf
	whole bool         // buf holds the whole file
	size  int64
	sum   string
}

// release closes and returns what a prepared item holds.
func (it *item) release() {
	if it.f != nil {
		it.f.Close()
		it.f = nil
	}
	if it.buf != nil {
		bufPool.Put(it.buf)
		it.buf = nil
	}
}

type pipeline struct {
	ctx    context.Context
	cancel context.CancelFunc
	fs     storage.Driver
	root   string
	dirs   bool // a walk hands directories on, as prepared items
	queue  chan *item
	jobs   chan *item
	wg     sync.WaitGroup
	late   []*item // taken from queue but not yet prepared when the pipeline stopped
	dir    *dirRef // of the member queued last, held by the producer
}

// A dirRef is an open directory shared by the members in it: the
// producer opens it for the first, and whoever is last done with it,
// producer or worker, closes it.
type dirRef struct {
	rel  string      // relative to the transfer's path
	d    storage.Dir // nil if it could not be opened
	refs atomic.Int32
}

func (r *dirRef) release() {
	if r.refs.Add(-1) == 0 && r.d != nil {
		r.d.Close()
	}
}

// startPipeline starts preparing the members of a transfer of root with
// prepare: members, or every file of the tree below root when there are
// none (and every directory too, when dirs).
func startPipeline(ctx context.Context, fsys storage.Driver, root string, members []string, dirs bool, prepare func(context.Context, *item)) *pipeline {
	ctx, cancel := context.WithCancel(ctx)
	p := &pipeline{ctx: ctx, cancel: cancel, fs: fsys, root: root, dirs: dirs,
		queue: make(chan *item, inFlight), jobs: make(chan *item)}
	p.wg.Add(1 + inFlight)
	go func() {
		defer p.wg.Done()
		defer close(p.queue)
		defer close(p.jobs)
		defer p.leaveDir()
		if len(members) == 0 {
			p.walk("", nil)
			return
		}
		for _, m := range members {
			it := &item{name: m}
			it.rel, it.err = memberName(m)
			if !p.put(it) {
				return
			}
		}
	}()
	for range inFlight {
		go func() {
			defer p.wg.Done()
			for it := range p.jobs {
				prepare(ctx, it)
				it.dir.release()
				it.dir = nil
				close(it.ready)
			}
		}()
	}
	return p
}

// put queues it, and hands it to a worker unless there is nothing to
// prepare; false once the pipeline stops.
func (p *pipeline) put(it *item) bool {
	it.ready = make(chan struct{})
	select {
	case p.queue <- it:
	case <-p.ctx.Done():
		return false
	}
	if it.err != nil || it.info.IsDir() {
		close(it.ready)
		return true
	}
	it.dir = p.enterDir(path.Dir(it.rel))
	it.dir.refs.Add(1)
	select {
	case p.jobs <- it:
		return true
	case <-p.ctx.Done():
		it.dir.release()
		it.dir = nil
		close(it.ready) // never prepared: it holds nothing
		return false
	}
}

// enterDir returns the directory rel, opened unless it is the one of the
// member queued before: members come directory by directory.
func (p *pipeline) enterDir(rel string) *dirRef {
	if p.dir != nil && p.dir.rel == rel {
		return p.dir
	}
	p.leaveDir()
	p.dir = &dirRef{rel: rel}
	p.dir.refs.Store(1)
	if d, err := storage.OpenDir(p.ctx, p.fs, path.Join(p.root, rel)); err == nil {
		p.dir.d = d
	}
	return p.dir
}

// leaveDir drops the producer's hold on the directory of the member
// queued last.
func (p *pipeline) leaveDir() {
	if p.dir != nil {
		p.dir.release()
		p.dir = nil
	}
}

// openMember opens the member it of the transfer of root for reading,
// after describing it unless the walk did, for a worker's prepare: through
// its directory if that is open, else by its whole name, which reports why
// the directory could not be opened.
func openMember(ctx context.Context, fsys storage.Driver, root string, it *item) (storage.File, error) {
	type opener interface {
		Stat(ctx context.Context, name string) (storage.Info, error)
		Open(ctx context.Context, name string) (storage.File, error)
	}
	var o opener = fsys
	name := path.Join(root, it.rel)
	if it.dir.d != nil && it.rel != "." {
		o, name = it.dir.d, path.Base(it.rel)
	}
	if so, ok := o.(storage.StatOpener); ok && !it.stated {
		f, in, err := so.OpenStat(ctx, name)
		if err == nil {
			err = memberFile(in)
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			return nil, err
		}
		it.info = in
		return f, nil
	}
	if !it.stated {
		in, err := o.Stat(ctx, name)
		if err == nil {
			err = memberFile(in)
		}
		if err != nil {
			return nil, err
		}
		it.info = in
	}
	return o.Open(ctx, name)
}

// listWindow is how many entries of a directory a walk holds at once: it
// lists each directory as a stream (storage.ListDir), and sorts by name and
// queues each window of that many entries as it fills, so that a directory
// of millions of entries costs the memory of a window. A directory is
// walked while its parent's window is held, and its parent's listing open.
const listWindow = 4096

// errStopped ends a walk's listing once the pipeline stops.
var errStopped = errors.New("tarstream: the pipeline stopped")

// walk queues the tree below rel, depth first, each window of a
// directory's entries in name order, and dir, the directory's item unless
// nil, before the first of them; false once the pipeline stops. A
// directory that cannot be listed is queued as a failed member instead,
// after the members listed before its listing failed, if any.
func (p *pipeline) walk(rel string, dir *item) bool {
	var window []storage.Info
	flush := func() bool {
		if dir != nil && !p.put(dir) {
			return false
		}
		dir = nil
		slices.SortFunc(window, func(a, b storage.Info) int { return strings.Compare(a.Name, b.Name) })
		for _, in := range window {
			if !p.entry(rel, in) {
				return false
			}
		}
		window = window[:0]
		return true
	}
	listed := false // some entry was
	err := storage.ListDir(p.ctx, p.fs, path.Join(p.root, rel), func(in storage.Info) error {
		listed = true
		if window = append(window, in); len(window) == listWindow && !flush() {
			return errStopped
		}
		return nil
	})
	switch {
	case err == nil:
		return flush()
	case errors.Is(err, errStopped) || p.ctx.Err() != nil:
		return false
	case listed && !flush():
		return false
	}
	if rel == "" {
		rel = "."
	}
	return p.put(&item{name: rel, rel: rel, err: err})
}

// entry queues the entry in of the directory rel, and the tree below it
// if it is a directory; false once the pipeline stops.
func (p *pipeline) entry(rel string, in storage.Info) bool {
	r := path.Join(rel, in.Name)
	it := &item{name: r, rel: r, info: in, stated: true}
	switch {
	case isLink(in):
		it.err = refused("a symbolic link")
	case in.IsDir():
		if !p.dirs {
			it = nil
		}
		return p.walk(r, it)
	case !in.Mode.IsRegular():
		it.err = refused("not a regular file")
	}
	return p.put(it)
}

// next returns the next member once it is prepared; nil after the last.
func (p *pipeline) next() (*item, error) {
	var it *item
	select {
	case i, ok := <-p.queue:
		if !ok {
			return nil, p.ctx.Err()
		}
		it = i
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	select {
	case <-it.ready:
		return it, nil
	case <-p.ctx.Done():
		// The worker finishes it; stop releases it.
		p.late = append(p.late, it)
		return nil, p.ctx.Err()
	}
}

// stop ends the pipeline and releases what its members hold.
func (p *pipeline) stop() {
	p.cancel()
	p.wg.Wait()
	for it := range p.queue {
		it.release() // every queued member is prepared once the workers are gone
	}
	for _, it := range p.late {
		it.release()
	}
	p.late = nil
}
