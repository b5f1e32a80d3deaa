// Package partname is the one rule for the temporary names under which
// ferry writes a file until it is whole: the engine (a file it sends) and
// the tar layer (a member it unpacks) both write to a hidden name in the
// file's own directory and rename it over the file's name once all its
// data has landed (and, when asked, was verified), so that no file short
// of its data ever bears its final name.
//
// The name depends only on the final name's last element, so a later
// transfer of the same file finds what an interrupted one left there and
// can resume from it.
package partname

import (
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"strings"
)

const prefix, suffix = ".ferry-", ".part"

// For is the temporary name of the file p (a slash-separated path, or a
// name alone): ".ferry-<hash>.part" in p's directory, the hash that of p's
// last element.
func For(p string) string {
	dir, base := path.Split(p)
	h := fnv.New64a()
	io.WriteString(h, base)
	return dir + fmt.Sprintf("%s%016x%s", prefix, h.Sum64(), suffix)
}

// Is reports whether name (a path's last element) is a temporary name of
// For's making.
func Is(name string) bool {
	const hexDigits = 16
	if len(name) != len(prefix)+hexDigits+len(suffix) || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return false
	}
	for _, r := range name[len(prefix) : len(prefix)+hexDigits] {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
