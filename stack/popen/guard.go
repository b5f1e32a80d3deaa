package popen

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
)

// inputCheck reads a program's input, as it arrives, and fails at the
// first thing the program must not see.
type inputCheck func(r io.Reader) error

// tarCheck is the check of what tar x unpacks: tar follows a symlink
// already in the tree, so an archive that makes one leading out, and then
// another that writes through it, would write outside the tree. No member
// may be absolute or hold "..", nor a link point to such a name. A
// compressed archive is refused (compressed: its compression, "" none):
// a decompressor holds back what it decoded, so its headers could reach
// tar before the check saw them.
func tarCheck(compressed string) (inputCheck, error) {
	if compressed != "" {
		return nil, fmt.Errorf("tar x unpacks plain archives only, not %s: compressed ones cannot be checked on their way", compressed)
	}
	return func(r io.Reader) error {
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("the archive: %w", err)
			}
			if err := tarMember(h); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return fmt.Errorf("the archive: %w", err)
			}
		}
	}, nil
}

// tarMember checks one member of an archive tar x unpacks.
func tarMember(h *tar.Header) error {
	if err := inside(h.Name); err != nil {
		return fmt.Errorf("member '%s': %w", h.Name, err)
	}
	if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
		if err := inside(h.Linkname); err != nil {
			return fmt.Errorf("member '%s', a link to '%s': %w", h.Name, h.Linkname, err)
		}
	}
	return nil
}

// inside refuses a name that is absolute or holds "..".
func inside(name string) error {
	if path.IsAbs(name) {
		return errors.New("absolute")
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == ".." {
			return errors.New("holds '..'")
		}
	}
	return nil
}

// guard runs an inputCheck on a program's input in step with the writes:
// Check returns once the check has read all of the bytes given and asks
// for more, so that the bytes go on to the program only after every
// header they complete passed (tar.Reader reads no further ahead than a
// header or a member's content).
type guard struct {
	chunks chan []byte
	acks   chan error // one per chunk: nil once the check read all of it
	stop   sync.Once

	mu  sync.Mutex
	err error // why the check failed
}

// newGuard starts check on what Check is given.
func newGuard(check inputCheck) *guard {
	g := &guard{chunks: make(chan []byte), acks: make(chan error, 1)}
	go g.run(check)
	return g
}

func (g *guard) run(check inputCheck) {
	r := &guardReader{g: g}
	err := check(r)
	if err == nil {
		_, err = io.Copy(io.Discard, r) // what follows the archive's end
	}
	if err == nil || r.closed {
		return
	}
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
	if r.pending {
		g.acks <- err
	}
	for range g.chunks { // refused, until Close
		g.acks <- err
	}
}

// Check waits until the check has read b, and fails if it failed.
func (g *guard) Check(b []byte) error {
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	if err != nil {
		return err
	}
	g.chunks <- b
	if err := <-g.acks; err != nil {
		return err
	}
	return nil
}

// Close ends the check's input.
func (g *guard) Close() { g.stop.Do(func() { close(g.chunks) }) }

// guardReader is the check's input: the chunks Check gives, each acked
// once read to its end.
type guardReader struct {
	g       *guard
	chunk   []byte
	pending bool // a Check waits for the ack of chunk
	closed  bool
}

func (r *guardReader) Read(b []byte) (int, error) {
	for len(r.chunk) == 0 {
		if r.pending {
			r.pending = false
			r.g.acks <- nil
		}
		c, ok := <-r.g.chunks
		if !ok {
			r.closed = true
			return 0, io.EOF
		}
		r.chunk, r.pending = c, true
	}
	n := copy(b, r.chunk)
	r.chunk = r.chunk[n:]
	return n, nil
}
