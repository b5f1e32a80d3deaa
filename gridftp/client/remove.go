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
func (c *Conn) RemoveAll(ctx context.Context, p string) error {
	e, err := c.Stat(ctx, p)
	if err != nil {
		return err
	}
	return c.remove(ctx, p, e)
}

// remove deletes p, described by e.
func (c *Conn) remove(ctx context.Context, p string, e gridftp.Entry) error {
	if !e.IsDir() {
		_, err := c.Do(ctx, "DELE %s", p)
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
			if err := c.remove(ctx, path.Join(p, child.Name), child); err != nil {
				return err
			}
		}
	}
	_, err := c.Do(ctx, "RMD %s", p)
	return err
}

// ListedName reports whether name can be an entry of a directory listing:
// not empty, not "." or "..", without a slash. Walkers ignore other names,
// which only a hostile server would send.
func ListedName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}
