package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"

	"ferry/gridftp"
	"ferry/gridftp/client"
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

// deleteExtra deletes what the destination directory of w has and its
// source directory does not: from the names the walk kept, or, for a
// source too large to keep them, by the destination's listing, streamed,
// its names looked up at the source in windows. An entry the filters
// exclude is kept, as rsync keeps it, and so is one that is a source of
// the copy (a destination above its source), and a temporary name (a
// copy may be writing it, or resume from it).
func (p *planner) deleteExtra(ctx context.Context, w *walk) error {
	var extra []gridftp.Entry
	if w.names != nil && !w.huge {
		for _, name := range slices.Sorted(maps.Keys(w.existing)) {
			if !w.names[name] {
				extra = append(extra, w.existing[name])
			}
		}
	} else {
		var err error
		if extra, err = p.extraStreamed(ctx, w); err != nil {
			return err
		}
	}
	for _, de := range extra {
		name := de.Name
		if partname.Is(name) {
			continue
		}
		if ok, _ := included(p.opts.Filters, de); !ok {
			continue // excluded (or a bad pattern): kept
		}
		d := path.Join(w.dst, name)
		if p.sources.protects(d, de) {
			continue
		}
		err := p.dst.RemoveTree(ctx, d, p.removed)
		var refused *gridftp.Error
		if errors.As(err, &refused) {
			// Src is where the source would have it.
			p.settled(FileResult{Src: path.Join(w.src, name), Dst: d, Outcome: Failed, Attempts: 1,
				Err: fmt.Errorf("delete destination entry missing at the source: %w", err)})
			continue
		}
		if err != nil {
			return fmt.Errorf("delete %s at the destination: %w", d, err)
		}
	}
	return nil
}

// extraStreamed lists the destination directory of w as a stream and
// looks its names up at the source in windows of listWindow: it returns
// the entries the source does not have.
func (p *planner) extraStreamed(ctx context.Context, w *walk) ([]gridftp.Entry, error) {
	var extra, buf []gridftp.Entry
	checked := false
	check := func() error {
		checked = true
		paths := make([]string, len(buf))
		for i, de := range buf {
			paths[i] = path.Join(w.src, de.Name)
		}
		_, errs, err := p.src.StatAll(ctx, paths)
		if err != nil {
			return fmt.Errorf("look up in source %s: %w", w.src, err)
		}
		for i, de := range buf {
			if isNotFound(errs[i]) {
				extra = append(extra, de)
			}
		}
		buf = buf[:0]
		return nil
	}
	err := p.listAt(ctx, true, w.dst, func(de gridftp.Entry) error {
		if !client.ListedName(de.Name) || partname.Is(de.Name) {
			return nil
		}
		buf = append(buf, de)
		if len(buf) >= listWindow {
			return check()
		}
		return nil
	}, func() bool { return checked })
	if err == nil && len(buf) > 0 {
		err = check()
	}
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("list destination %s: %w", w.dst, err)
	}
	return extra, nil
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
// the copy has chosen its settings from the first files it listed, before
// any data moves.
type Starter interface {
	Started(Settings)
}

// Tuner is an optional interface of a Reporter: Tuned is called when the
// optimizer changes the number of session pairs, from to to, because the
// rate (bytes per second over its last interval) went from prev to cur.
type Tuner interface {
	Tuned(from, to int, prev, cur float64)
}

// Walker is an optional interface of a Reporter: Walked is called as the
// copy lists its work, with the number of source directories it walked so
// far (every one, also those whose files were all skipped): each call
// replaces the last.
type Walker interface {
	Walked(dirs int)
}

// Mismatch reports an error saying the data arrived damaged: the
// checksums at both ends differed, as the engine or the destination server
// (INCORRECT_CHECKSUM) found.
func Mismatch(err error) bool {
	return errors.Is(err, errMismatch) || gridftp.Classify(err) == gridftp.FaultChecksum
}
