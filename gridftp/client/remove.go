package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path"
	"strings"

	"ferry/gridftp"
)

// RemoveAll deletes path and, when it is a directory, everything below it:
// depth first, DELE for files and RMD for directories. A symlink is removed
// itself, never followed, and names a server should never list ("..", names
// with a slash) are left alone.
func (c *Conn) RemoveAll(ctx context.Context, p string) error { return c.RemoveTree(ctx, p, nil) }

// RemoveTree is RemoveAll that calls removed (if not nil) with each path
// it deleted and its entry, as it goes: what a directory held before the
// directory.
func (c *Conn) RemoveTree(ctx context.Context, p string, removed func(string, gridftp.Entry)) error {
	e, err := c.Stat(ctx, p)
	if err != nil {
		return err
	}
	return c.remove(ctx, p, e, removed)
}

// remove deletes p, described by e, and tells removed.
func (c *Conn) remove(ctx context.Context, p string, e gridftp.Entry, removed func(string, gridftp.Entry)) error {
	if !e.IsDir() {
		_, err := c.Do(ctx, "DELE %s", p)
		if err == nil && removed != nil {
			removed(p, e)
		}
		return err
	}
	if e.Target == "" { // a directory, not a link to one: empty it first
		children, err := c.listed(ctx, p)
		if err != nil {
			return err
		}
		defer children.close()
		for child, err := range children.all() {
			if err == nil {
				err = c.remove(ctx, path.Join(p, child.Name), child, removed)
			}
			if err != nil {
				return err
			}
		}
	}
	_, err := c.Do(ctx, "RMD %s", p)
	if err == nil && removed != nil {
		removed(p, e)
	}
	return err
}

// ListedName reports whether name can be an entry of a directory listing:
// not empty, not "." or "..", without a slash. Walkers ignore other names,
// which only a hostile server would send.
func ListedName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}

// removeWindow is how many entries of a directory being emptied are held
// in memory; a directory with more is listed to a temporary file first
// (a variable for tests).
var removeWindow = 10000

// entries are the entries of one directory listing: held, or past
// removeWindow of them, in an unlinked temporary file.
type entries struct {
	held  []gridftp.Entry
	spill *os.File
	w     *bufio.Writer
}

// listed lists directory p into entries, leaving out names a server
// should never list (ListedName).
func (c *Conn) listed(ctx context.Context, p string) (*entries, error) {
	es := &entries{}
	err := c.ListEach(ctx, p, func(e gridftp.Entry) error {
		switch {
		case !ListedName(e.Name):
			return nil
		case es.spill == nil && len(es.held) < removeWindow:
			es.held = append(es.held, e)
			return nil
		case es.spill == nil:
			f, err := os.CreateTemp("", "ferry-rm-*")
			if err != nil {
				return fmt.Errorf("list %s: %w", p, err)
			}
			os.Remove(f.Name()) // gone with the process, however it ends
			es.spill, es.w = f, bufio.NewWriter(f)
			for _, h := range es.held {
				fmt.Fprintln(es.w, h.Format())
			}
			es.held = nil
		}
		_, err := fmt.Fprintln(es.w, e.Format())
		return err
	})
	if err == nil && es.w != nil {
		err = es.w.Flush()
	}
	if err != nil {
		es.close()
		return nil, err
	}
	return es, nil
}

// all yields the entries in the order listed; an error ends them.
func (es *entries) all() iter.Seq2[gridftp.Entry, error] {
	return func(yield func(gridftp.Entry, error) bool) {
		if es.spill == nil {
			for _, e := range es.held {
				if !yield(e, nil) {
					return
				}
			}
			return
		}
		if _, err := es.spill.Seek(0, io.SeekStart); err != nil {
			yield(gridftp.Entry{}, err)
			return
		}
		sc := bufio.NewScanner(es.spill)
		sc.Buffer(make([]byte, 64<<10), maxLine+1)
		for sc.Scan() {
			e, err := gridftp.ParseEntry(sc.Text())
			if !yield(e, err) || err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(gridftp.Entry{}, err)
		}
	}
}

func (es *entries) close() {
	if es.spill != nil {
		es.spill.Close()
	}
}
