package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// lineage is a path and its ancestors, deepest first and "/" last, as one
// end described them: es[i] and errs[i] are what MLST of paths[i] said.
type lineage struct {
	paths []string
	es    []gridftp.Entry
	errs  []error
}

// maxLinks bounds the symlinks followed to resolve one path, as the
// kernel's ELOOP does: a loop of links is refused, not followed for ever.
const maxLinks = 40

// errLinkLoop is a path whose symlinks do not end in maxLinks steps.
var errLinkLoop = errors.New("too many levels of symbolic links")

// ancestry lists p and its ancestors, deepest first and "/" last.
func ancestry(p string) []string {
	chain := []string{p}
	for d := path.Clean(p); d != "/" && d != "."; {
		d = path.Dir(d)
		chain = append(chain, d)
	}
	return chain
}

// lookUp describes p and its ancestors at c, in one round trip, and with
// them the paths more: each one's entry, or nil where it is missing.
func lookUp(ctx context.Context, c *client.Conn, p string, more ...string) (lineage, []*gridftp.Entry, error) {
	paths := ancestry(p)
	n := len(paths)
	es, errs, err := c.StatAll(ctx, append(paths, more...))
	if err != nil {
		return lineage{}, nil, err
	}
	found := make([]*gridftp.Entry, len(more))
	for i := range more {
		if errs[n+i] == nil {
			found[i] = &es[n+i]
		}
	}
	return lineage{paths: paths[:n:n], es: es[:n:n], errs: errs[:n:n]}, found, nil
}

// real is the lineage of where l's path really is: while an existing
// member is a symlink the server followed (its Target fact: GCT names the
// resolved path, ferry's server the link's own text), the path it leads to
// is looked up instead. A lineage without links is its own, at no cost.
func (l lineage) real(ctx context.Context, c *client.Conn) (lineage, error) {
	for range maxLinks {
		p, ok := l.unlinked()
		if !ok {
			return l, nil
		}
		var err error
		if l, _, err = lookUp(ctx, c, p); err != nil {
			return lineage{}, err
		}
	}
	return lineage{}, fmt.Errorf("%s: %w", l.paths[0], errLinkLoop)
}

// unlinked is l's path with its topmost symlink replaced by the path it
// leads to; false when no existing member is a link.
func (l lineage) unlinked() (string, bool) {
	for i := len(l.paths) - 1; i >= 0; i-- {
		if l.errs[i] != nil || l.es[i].Target == "" {
			continue
		}
		link, to := path.Clean(l.paths[i]), l.es[i].Target
		if !path.IsAbs(to) {
			to = path.Join(path.Dir(link), to)
		}
		below := strings.TrimPrefix(path.Clean(l.paths[0]), link)
		return path.Join(to, below), true
	}
	return "", false
}

// sameFunc reports whether the destination entry de at dp is the source
// entry se at sp.
type sameFunc func(sp string, se gridftp.Entry, dp string, de gridftp.Entry) bool

// overlap says why a directory item whose source and destination have the
// real lineages src and dst cannot be copied, or "": its destination is
// the source or lies inside it, or, deleting extras, holds it (its other
// entries are the source's neighbours, which would be deleted). name is
// the source as the item names it.
func overlap(name string, src, dst lineage, deleteExtra bool, same sameFunc) string {
	for i, d := range dst.paths {
		if dst.errs[i] != nil || !same(src.paths[0], src.es[0], d, dst.es[i]) {
			continue
		}
		if i == 0 {
			return "is the source " + name + " itself"
		}
		return "is inside the source " + name
	}
	if deleteExtra && holds(src, dst, same) {
		return "holds the source " + name + ": deleting its extra entries would delete what lies beside the source"
	}
	return ""
}

// holds reports whether the destination (real lineage dst) is an ancestor
// of the source (src).
func holds(src, dst lineage, same sameFunc) bool {
	if dst.errs[0] != nil {
		return false
	}
	for j := 1; j < len(src.paths); j++ {
		if src.errs[j] == nil && same(src.paths[j], src.es[j], dst.paths[0], dst.es[0]) {
			return true
		}
	}
	return false
}

// overlaps refuses a directory item (an *ItemError) whose destination is
// its source, lies inside it or, deleting extras, holds it, with symlinks
// followed at both ends; dstL is the destination's lineage look found.
// It reports whether the destination holds the source (the planner then
// lists every source before it writes).
func (p *planner) overlaps(ctx context.Context, it Item, dstL lineage) (bool, error) {
	if p.opts.blind() {
		return false, nil // the destination cannot be seen: the relay's copy checks its own
	}
	var srcL lineage
	var serr, derr error
	both(func() {
		if srcL, _, serr = lookUp(ctx, p.src, it.Src); serr == nil {
			srcL, serr = srcL.real(ctx, p.src)
		}
	}, func() { dstL, derr = dstL.real(ctx, p.dst) })
	if serr != nil {
		return false, fmt.Errorf("source %s: %w", it.Src, serr)
	}
	if derr != nil {
		return false, fmt.Errorf("destination %s: %w", it.Dst, derr)
	}
	if srcL.errs[0] != nil {
		return false, fmt.Errorf("source %s: %w", it.Src, srcL.errs[0])
	}
	why := overlap(it.Src, srcL, dstL, p.opts.DeleteExtra, p.sources.same)
	if why == "" {
		return holds(srcL, dstL, p.sources.same), nil
	}
	if real := dstL.paths[0]; real != path.Clean(it.Dst) {
		why += " (through a symlink, it is " + real + ")"
	}
	return false, &ItemError{Path: it.Dst, Dest: true, Why: why}
}

// Overlap refuses, by its paths alone, an item whose source and
// destination are on one storage (one server, or servers of one tree)
// when its destination is its source, lies inside it (recursive) or,
// deleting extras, holds it: the rule Copy and Check apply, for a caller
// that cannot ask the servers (an *ItemError). Symlinks and other names of
// one object are what Copy and Check see in addition.
func Overlap(it Item, deleteExtra bool) error {
	src, dst := path.Clean(it.Src), path.Clean(it.Dst)
	if !it.Recursive {
		if strings.HasSuffix(it.Dst, "/") {
			dst = path.Join(dst, path.Base(src))
		}
		if dst == src {
			return &ItemError{Path: dst, Dest: true, Why: "is the source " + src + " itself"}
		}
		return nil
	}
	samePath := func(sp string, _ gridftp.Entry, dp string, _ gridftp.Entry) bool { return sp == dp }
	if why := overlap(src, byPath(src), byPath(dst), deleteExtra, samePath); why != "" {
		return &ItemError{Path: dst, Dest: true, Why: why}
	}
	return nil
}

// byPath is the lineage of p as paths alone tell it: every member exists.
func byPath(p string) lineage {
	paths := ancestry(p)
	return lineage{paths: paths, es: make([]gridftp.Entry, len(paths)), errs: make([]error, len(paths))}
}
