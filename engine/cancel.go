package engine

import (
	"context"
	"path"
	"strings"
	"sync"
)

// Cancels is the set of source paths a caller cancels: a file, or a
// directory and everything below it. A copy given it in Options leaves
// those files out, stops their transfers in flight at once and reports
// each as Canceled; a cancel never counts as a fault. Safe for concurrent
// use, also while copies run.
type Cancels struct {
	mu    sync.Mutex
	paths []string
	watch func(string) // the running copy's cancel
}

// Cancel cancels the files at p or below it.
func (cs *Cancels) Cancel(p string) {
	p = path.Clean("/" + p)
	cs.mu.Lock()
	cs.paths = append(cs.paths, p)
	watch := cs.watch
	cs.mu.Unlock()
	if watch != nil {
		watch(p)
	}
}

// attach makes watch see the paths canceled from now on (nil: nobody)
// and returns those canceled so far.
func (cs *Cancels) attach(watch func(string)) []string {
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.watch = watch
	return append([]string(nil), cs.paths...)
}

// covers reports whether canceling p cancels the file src.
func covers(p, src string) bool {
	return p == "/" || src == p || strings.HasPrefix(src, p+"/")
}

// cancel stops the files at p or below it: each is reported Canceled at
// once, its bytes so far are taken back from the progress, and the
// session pairs moving its units drop them.
func (c *copier) cancel(p string) {
	c.mu.Lock()
	c.canceled = append(c.canceled, p)
	var hit []*file
	for f := range c.live {
		if covers(p, f.src) {
			hit = append(hit, f)
		}
	}
	var aborts []context.CancelFunc
	for u, abort := range c.flying {
		if u.covers(p) {
			aborts = append(aborts, abort)
		}
	}
	c.mu.Unlock()
	for _, f := range hit {
		c.final(f, Canceled, nil)
	}
	for _, abort := range aborts {
		abort()
	}
}

// isCanceled reports whether a path canceled so far covers src. Called
// with c.mu held.
func (c *copier) isCanceled(src string) bool {
	for _, p := range c.canceled {
		if covers(p, src) {
			return true
		}
	}
	return false
}

// fly records that u moves on a pair that abort stops; land forgets it.
func (c *copier) fly(u *unit, abort context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flying == nil {
		c.flying = map[*unit]context.CancelFunc{}
	}
	c.flying[u] = abort
}

func (c *copier) land(us ...*unit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range us {
		delete(c.flying, u)
	}
}
