package tarstream

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"strings"
	"sync"

	"ferry/checksum"
	"ferry/stack"
	"ferry/storage"
)

// The names of the layers.
const (
	TarLayer   = "tar"
	CksumLayer = "cksum"
)

// Kinds returns the layers of this package by name, for a server's
// stack.Registry.
func Kinds() stack.Registry {
	return stack.Registry{
		TarLayer:   {Terminal: newTar},
		CksumLayer: {Terminal: newCksum},
	}
}

// ErrChanged is wrapped by the error of a member that changed size while it
// was read.
var ErrChanged = errors.New("file changed while read")

// bufSize is the size of the pooled buffers files are read and written
// with.
const bufSize = 256 << 10

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, bufSize)
	return &b
}}

// options reads a layer's options: only key, a checksum algorithm, with
// def when it is not given.
func options(e stack.Entry, key, def string) (alg string, err error) {
	alg = def
	for _, o := range e.Opts {
		if o.Key != key {
			return "", stack.Refuse(fmt.Sprintf("%s: unknown option %q; it takes %s=<algorithm> only.", e.Name, o.Key, key))
		}
		if alg, err = checksum.Canonical(o.Value); err != nil {
			return "", stack.Refuse(fmt.Sprintf("%s: unknown checksum algorithm %q; known: %s.", e.Name, o.Value, strings.Join(checksum.Names(), ", ")))
		}
	}
	return alg, nil
}

// newHash returns a hash for alg, nil for "".
func newHash(alg string) hash.Hash {
	if alg == "" {
		return nil
	}
	h, err := checksum.New(alg)
	if err != nil {
		panic(err) // alg came from checksum.Canonical
	}
	return h
}

func hexSum(h hash.Hash) string {
	var b [64]byte
	return hex.EncodeToString(h.Sum(b[:0]))
}

// refused is the error of a member the layer will not write or read.
func refused(why string) error {
	return &stack.ShownError{Text: "refused: " + why, Err: storage.ErrPermission}
}

// memberName cleans a member's name, relative to the transfer's path, and
// refuses one that is absolute or climbs out of it.
func memberName(name string) (string, error) {
	switch {
	case name == "" || strings.IndexByte(name, 0) >= 0:
		return "", refused("an empty name or one with a NUL byte")
	case path.IsAbs(name):
		return "", refused("an absolute name")
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", refused("a name outside the directory")
	}
	return c, nil
}

// isLink reports whether a driver describes a symbolic link: one that
// stays in the tree is described as its target with Target set, one that
// leads out (or dangles) as the link itself.
func isLink(in storage.Info) bool {
	return in.Target != "" || in.Mode&fs.ModeSymlink != 0
}

// checkDir fails unless the transfer's path is a directory.
func checkDir(ctx context.Context, fsys storage.Driver, layer, name string) error {
	info, err := fsys.Stat(ctx, name)
	if err == nil && !info.IsDir() {
		err = fmt.Errorf("%s %s: %w", layer, name, storage.ErrNotDir)
	}
	return err
}

// memberFile is the checks a member must pass to be read as a regular
// file, given how the driver described it.
func memberFile(in storage.Info) error {
	switch {
	case isLink(in):
		return refused("a symbolic link")
	case in.IsDir():
		return fmt.Errorf("member %s: %w", in.Name, storage.ErrIsDir)
	case !in.Mode.IsRegular():
		return refused("not a regular file")
	}
	return nil
}
