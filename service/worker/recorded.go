package worker

import (
	"container/list"
	"context"
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	"ferry/service/domain"
)

// recorded says whether a file of a task (a source and its destination:
// one source may go to several) has a record in the store, for the engine's Options.Skip, holding only a window of the
// task's records: the names recorded in the directories asked about last
// (the engine asks about the files of a directory together), loaded with
// one Store.RecordedIn each, as 64-bit hashes of name and destination (8
// bytes a file, whatever its length; two share one with odds of 2^-64 a
// pair), at most
// max of them but a directory's own, least recently used dropped first.
// A directory is read without the lock held, so that add, which the
// progress calls with its own lock held, never waits for the store. A
// record made during the run goes into its directory's set if that is
// held or being read (add); one not yet stored is the progress's to know.
type recorded struct {
	store  domain.Store
	taskID string
	seed   maphash.Seed
	max    int // hashes held at most, but those of the directory asked about

	mu    sync.Mutex
	dirs  map[string]*list.Element // of *names
	lru   list.List                // front: asked about last
	held  int                      // hashes in dirs
	reads map[string]*dirRead      // directories being read
}

// maxHeld is a recorded's max: 8 MiB of hashes.
const maxHeld = 1 << 20

// names is what a recorded holds of one directory: the hashes read from
// the store and those noted since, sorted, and the last few noted, in a
// set merged into them once it holds more than an eighth as many (merge):
// a map costs several times the 8 bytes of a hash, and a run of a large
// directory notes every file of it.
type names struct {
	dir    string
	sorted []uint64
	added  map[uint64]struct{} // noted since the last merge
}

// merge moves the added hashes into sorted.
func (n *names) merge() {
	add := slices.Sorted(maps.Keys(n.added))
	n.added = nil
	i, j := len(n.sorted)-1, len(add)-1
	n.sorted = slices.Grow(n.sorted, len(add))[:len(n.sorted)+len(add)]
	for k := len(n.sorted) - 1; j >= 0; k-- { // from the end, in place
		if i >= 0 && n.sorted[i] > add[j] {
			n.sorted[k], i = n.sorted[i], i-1
		} else {
			n.sorted[k], j = add[j], j-1
		}
	}
}

// note adds h unless it is there, and says whether it was not.
func (n *names) note(h uint64) bool {
	if _, found := slices.BinarySearch(n.sorted, h); found {
		return false
	}
	if _, found := n.added[h]; found {
		return false
	}
	if n.added == nil {
		n.added = map[uint64]struct{}{}
	}
	n.added[h] = struct{}{}
	if len(n.added) > 64+len(n.sorted)/8 {
		n.merge()
	}
	return true
}

// dirRead is a directory being read: those who ask about it meanwhile
// wait for done.
type dirRead struct {
	done  chan struct{}
	added map[uint64]struct{}
	err   error
}

func newRecorded(store domain.Store, taskID string) *recorded {
	return &recorded{store: store, taskID: taskID, seed: maphash.MakeSeed(), max: maxHeld,
		dirs: map[string]*list.Element{}, reads: map[string]*dirRead{}}
}

// clear drops every directory: an engine run starts, and the records it
// meets are read afresh.
func (c *recorded) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.dirs)
	c.lru.Init()
	c.held = 0
}

// hash is what a recorded holds of the file name (in its source
// directory) going to dst.
func (c *recorded) hash(name, dst string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(name)
	h.WriteByte(0)
	h.WriteString(dst)
	return h.Sum64()
}

// has says whether src going to dst has a record, reading its
// directory's records unless they are held.
func (c *recorded) has(ctx context.Context, src, dst string) (bool, error) {
	dir, name := domain.SplitDir(src)
	h := c.hash(name, dst)
	for {
		c.mu.Lock()
		if e, ok := c.dirs[dir]; ok {
			c.lru.MoveToFront(e)
			n := e.Value.(*names)
			_, found := slices.BinarySearch(n.sorted, h)
			if !found {
				_, found = n.added[h]
			}
			c.mu.Unlock()
			return found, nil
		}
		if r, ok := c.reads[dir]; ok {
			c.mu.Unlock()
			select {
			case <-r.done:
			case <-ctx.Done():
				return false, ctx.Err()
			}
			if r.err != nil {
				return false, r.err
			}
			continue
		}
		r := &dirRead{done: make(chan struct{}), added: map[uint64]struct{}{}}
		c.reads[dir] = r
		c.mu.Unlock()
		var sorted []uint64
		r.err = c.store.RecordedIn(ctx, c.taskID, dir, func(name, dst string) {
			sorted = append(sorted, c.hash(name, dst))
		})
		slices.Sort(sorted)
		c.mu.Lock()
		delete(c.reads, dir)
		if r.err == nil {
			n := &names{dir: dir, sorted: slices.Compact(sorted)}
			for h := range r.added {
				n.note(h)
			}
			c.hold(n)
		}
		c.mu.Unlock()
		close(r.done)
		if r.err != nil {
			return false, r.err
		}
	}
}

// hold keeps a directory read, dropping those asked about least
// recently while more than max hashes would be held. Called with c.mu
// held.
func (c *recorded) hold(n *names) {
	size := len(n.sorted) + len(n.added)
	for c.held+size > c.max && c.lru.Len() > 0 {
		d := c.lru.Remove(c.lru.Back()).(*names)
		delete(c.dirs, d.dir)
		c.held -= len(d.sorted) + len(d.added)
	}
	c.dirs[n.dir] = c.lru.PushFront(n)
	c.held += size
}

// add notes a record made during the run, if its directory is held or
// being read.
func (c *recorded) add(src, dst string) {
	dir, name := domain.SplitDir(src)
	h := c.hash(name, dst)
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.reads[dir]; ok {
		r.added[h] = struct{}{}
		return
	}
	e, ok := c.dirs[dir]
	if !ok {
		return
	}
	if e.Value.(*names).note(h) {
		c.held++
	}
}
