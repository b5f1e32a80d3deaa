package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"

	"ferry/gridftp"
	"ferry/internal/partname"
)

// Filter includes or excludes entries of recursive walks by base name.
// The first filter that matches an entry decides; an entry that none
// matches is included. An excluded directory is not walked.
type Filter struct {
	Exclude bool
	Name    string // a path.Match glob on the base name
	Type    string // "file", "dir", or "" for both
}

// included applies the filters to one entry.
func included(filters []Filter, e gridftp.Entry) (bool, error) {
	for _, f := range filters {
		if f.Type == "dir" && !e.IsDir() || f.Type == "file" && e.IsDir() {
			continue
		}
		ok, err := path.Match(f.Name, e.Name)
		if err != nil {
			return false, fmt.Errorf("filter %q: %w", f.Name, err)
		}
		if ok {
			return !f.Exclude, nil
		}
	}
	return true, nil
}

// deleteExtra deletes what the destination directory dst (its entries in
// existing) has and the listed source directory t does not. An entry the
// filters exclude is kept, as rsync keeps it, and so is one that is a
// source of the copy (a destination above its source).
func (p *planner) deleteExtra(ctx context.Context, t *dir, dst string, existing map[string]gridftp.Entry) error {
	for _, name := range slices.Sorted(maps.Keys(existing)) {
		if t.names[name] || partname.Is(name) {
			continue // a temporary name: a copy may be writing it, or resume from it
		}
		de := existing[name]
		if ok, _ := included(p.opts.Filters, de); !ok {
			continue // excluded (or a bad pattern): kept
		}
		d := path.Join(dst, name)
		if p.sources.protects(d, de) {
			continue
		}
		err := p.dst.RemoveTree(ctx, d, p.removed)
		var refused *gridftp.Error
		if errors.As(err, &refused) {
			// Src is where the source would have it.
			p.settled(FileResult{Src: path.Join(t.src, name), Dst: d, Outcome: Failed, Attempts: 1,
				Err: fmt.Errorf("delete destination entry missing at the source: %w", err)})
			continue
		}
		if err != nil {
			return fmt.Errorf("delete %s at the destination: %w", d, err)
		}
	}
	return nil
}

// Deletion is a path that DeleteExtra deleted at the destination: an
// entry the source does not have, or what such a directory held.
type Deletion struct {
	Path string
	Dir  bool
	Size int64 // a file's
	// Dest is the destination's index among CopyMany's targets; 0 for Copy.
	Dest int
}

// Deleter is an optional interface of a Reporter: Deleted is called with
// each path DeleteExtra deletes, as it goes (what a directory held before
// the directory), so that a record of them needs no memory of the tree.
type Deleter interface {
	Deleted(Deletion)
}

// removed reports a path deleteExtra deleted.
func (p *planner) removed(d string, e gridftp.Entry) {
	p.deleted++
	if p.deleter != nil {
		p.deleter.Deleted(Deletion{Path: d, Dir: e.IsDir(), Size: e.Size})
	}
}

// Starter is an optional interface of a Reporter: Started is called once
// the copy has listed its work and chosen its settings, before any data
// moves.
type Starter interface {
	Started(Settings)
}

// Tuner is an optional interface of a Reporter: Tuned is called when the
// optimizer changes the number of session pairs, from to to, because the
// rate (bytes per second over its last interval) went from prev to cur.
type Tuner interface {
	Tuned(from, to int, prev, cur float64)
}

// Walker is an optional interface of a Reporter: Walked is called once
// the copy has listed its work, with the number of source directories it
// walked (every one, also those whose files were all skipped).
type Walker interface {
	Walked(dirs int)
}

// Mismatch reports an error saying the checksums at both ends differed.
func Mismatch(err error) bool { return errors.Is(err, errMismatch) }
