package client

import (
	"context"
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
		entries, err := c.List(ctx, p)
		if err != nil {
			return err
		}
		for _, child := range entries {
			if !ListedName(child.Name) {
				continue
			}
			if err := c.remove(ctx, path.Join(p, child.Name), child, removed); err != nil {
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
