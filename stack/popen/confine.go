package popen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"ferry/storage"
)

// tree confines the paths a client names in a program's arguments to the
// session's tree, as its commands are confined: through the storage
// driver, which follows symlinks only while they stay inside.
type tree struct {
	ctx context.Context
	fs  storage.Driver
	dir string // the local directory fs serves, where programs run
}

// resolve checks p, a path operand named relative to base (a path of the
// tree, "/" its root, where the program runs) or absolute from the root,
// and returns its path in the tree. It refuses "..", a path that leaves
// the tree through a symlink, and a symlink that leads out (or dangles);
// one that does not exist yet is fine.
func (t *tree) resolve(base, p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("bad path %q", p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("path '%s': no '..' in paths", p)
		}
	}
	name := storage.Clean(base, p)
	info, err := t.fs.Stat(t.ctx, name)
	switch {
	case errors.Is(err, storage.ErrPermission):
		return "", fmt.Errorf("path '%s' leads out of the served tree or may not be read", p)
	case err == nil && info.Mode&fs.ModeSymlink != 0:
		return "", fmt.Errorf("path '%s' is a symlink that leads out of the served tree", p)
	}
	return name, nil
}

// local is where name, a path of the tree, is on the local disk.
func (t *tree) local(name string) string {
	return filepath.Join(t.dir, filepath.FromSlash(path.Clean("/"+name)))
}

// operand checks a path operand named relative to base and returns it as
// the program gets it: an absolute path as its place on disk, a relative
// one as it is (the program resolves it where it runs, as checked).
func (t *tree) operand(base, p string) (string, error) {
	name, err := t.resolve(base, p)
	if err != nil {
		return "", err
	}
	if path.IsAbs(p) {
		return t.local(name), nil
	}
	return p, nil
}
