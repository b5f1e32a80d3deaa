package engine

import (
	"context"
	"fmt"
	"net"
	"path"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// sources are the objects a copy reads: its items, everything their
// listings found and, with DeleteExtra, the items' ancestors. A
// destination that is one of them is never written or deleted.
//
// Objects are known by the Unique fact (device and inode on ferry's and
// GCT's servers). Equal facts name one object only on one host, so a file
// matches only with equal size and time too, and a directory only when
// both control connections lead to one host. Servers that give no Unique
// fact are compared by path when both ends are one server.
type sources struct {
	src      *client.Conn
	byUnique map[string]source
	paths    map[string]bool
	sameHost bool // both control connections lead to one IP address
	sameAddr bool // ... and one port
}

type source struct {
	path string
	e    gridftp.Entry
}

func newSources(src, dst *client.Conn) sources {
	s := sources{src: src, byUnique: map[string]source{}, paths: map[string]bool{}}
	a, aok := src.RemoteAddr().(*net.TCPAddr)
	b, bok := dst.RemoteAddr().(*net.TCPAddr)
	if aok && bok {
		s.sameHost = a.IP.Equal(b.IP) || a.IP.IsLoopback() && b.IP.IsLoopback()
		s.sameAddr = a.IP.Equal(b.IP) && a.Port == b.Port
	}
	return s
}

// add records the source object e at p.
func (s *sources) add(p string, e gridftp.Entry) {
	if e.Unique != "" {
		s.byUnique[e.Unique] = source{path.Clean(p), e}
	}
	s.paths[path.Clean(p)] = true
}

// addAncestors records the directories above each item's source.
func (s *sources) addAncestors(ctx context.Context, items []Item) error {
	var dirs []string
	for _, it := range items {
		for d := path.Clean(it.Src); d != "/" && d != "."; {
			d = path.Dir(d)
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	es, errs, err := s.src.StatAll(ctx, dirs)
	if err != nil {
		return fmt.Errorf("look up the sources' directories: %w", err)
	}
	for i, d := range dirs {
		if errs[i] == nil {
			s.add(d, es[i])
		}
	}
	return nil
}

// find reports the source that the destination entry d at p is, if any.
func (s *sources) find(p string, d gridftp.Entry) (string, bool) {
	if d.Unique != "" && len(s.byUnique) > 0 {
		src, ok := s.byUnique[d.Unique]
		return src.path, ok && s.match(src.e, d)
	}
	p = path.Clean(p)
	return p, s.sameAddr && s.paths[p]
}

// protects reports whether the destination entry d at p may be a source:
// for deletions, a Unique fact alone is enough.
func (s *sources) protects(p string, d gridftp.Entry) bool {
	if _, ok := s.byUnique[d.Unique]; ok && d.Unique != "" {
		return true
	}
	return s.sameAddr && s.paths[path.Clean(p)]
}

// same reports whether the destination entry d at dp is the source e at sp.
func (s *sources) same(sp string, e gridftp.Entry, dp string, d gridftp.Entry) bool {
	if e.Unique != "" && d.Unique != "" {
		return e.Unique == d.Unique && s.match(e, d)
	}
	return s.sameAddr && path.Clean(sp) == path.Clean(dp)
}

// match reports whether two entries with one Unique fact are one object.
func (s *sources) match(e, d gridftp.Entry) bool {
	if e.IsDir() || d.IsDir() {
		return e.IsDir() && d.IsDir() && s.sameHost
	}
	return e.Size == d.Size && e.Modify.Equal(d.Modify)
}
