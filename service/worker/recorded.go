package worker

import (
	"container/list"
	"context"
	"hash/maphash"
	"slices"
	"sync"

	"ferry/service/domain"
)

// recorded says whether a source file of a task has a record in the
// store, for the engine's Options.Skip, holding only a window of the
// task's records: the names recorded in the directories asked about last
// (the engine asks about the files of a directory together), loaded with
// one Store.RecordedIn each, as 64-bit hashes (8 bytes a name, whatever
// its length; two names share one with odds of 2^-64 a pair), at most
// maxHeld of them but a directory's own, least recently used dropped
// first. A record made during the run goes into its directory's set if
// that is held (add); one not yet stored is the progress's to know.
type recorded struct {
	store  domain.Store
	taskID string
	seed   maphash.Seed

	mu   sync.Mutex
	dirs map[string]*list.Element // of *names
	lru  list.List                // front: asked about last
	held int                      // hashes in dirs
}

// maxHeld bounds the hashes a recorded holds, but those of the one
// directory asked about: 8 MiB.
const maxHeld = 1 << 20

// names is what a recorded holds of one directory.
type names struct {
	dir    string
	sorted []uint64            // loaded from the store
	added  map[uint64]struct{} // recorded since
}

func newRecorded(store domain.Store, taskID string) *recorded {
	return &recorded{store: store, taskID: taskID, seed: maphash.MakeSeed(), dirs: map[string]*list.Element{}}
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

// has says whether src has a record, reading its directory's records
// unless they are held.
func (c *recorded) has(ctx context.Context, src string) (bool, error) {
	dir, name := domain.SplitDir(src)
	h := maphash.String(c.seed, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.dirs[dir]
	if !ok {
		n := &names{dir: dir}
		if err := c.store.RecordedIn(ctx, c.taskID, dir, func(name string) {
			n.sorted = append(n.sorted, maphash.String(c.seed, name))
		}); err != nil {
			return false, err
		}
		slices.Sort(n.sorted)
		for c.held+len(n.sorted) > maxHeld && c.lru.Len() > 0 {
			c.drop(c.lru.Back())
		}
		e = c.lru.PushFront(n)
		c.dirs[dir] = e
		c.held += len(n.sorted)
	}
	c.lru.MoveToFront(e)
	n := e.Value.(*names)
	if _, ok := slices.BinarySearch(n.sorted, h); ok {
		return true, nil
	}
	_, ok = n.added[h]
	return ok, nil
}

// drop forgets a directory. Called with c.mu held.
func (c *recorded) drop(e *list.Element) {
	n := c.lru.Remove(e).(*names)
	delete(c.dirs, n.dir)
	c.held -= len(n.sorted) + len(n.added)
}

// add notes a record made during the run, if its directory is held.
func (c *recorded) add(src string) {
	dir, name := domain.SplitDir(src)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.dirs[dir]
	if !ok {
		return
	}
	n := e.Value.(*names)
	if n.added == nil {
		n.added = map[uint64]struct{}{}
	}
	n.added[maphash.String(c.seed, name)] = struct{}{}
	c.held++
}
