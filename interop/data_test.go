//go:build interop

package interop

import (
	"bytes"
	"crypto/md5"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// newRand returns a fast random source seeded from the OS.
func newRand() *rand.ChaCha8 {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}

// writeRandomFile creates (or replaces) path with size random bytes, creating
// parent directories.
func writeRandomFile(t testing.TB, path string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, newRand(), size); err != nil {
		f.Close()
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeFile creates path with the given content, creating parent directories.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o666); err != nil {
		t.Fatal(err)
	}
}

// treeFiles is the layout makeTree creates: nested directories, an empty
// file, and names with spaces. Sizes straddle block boundaries.
var treeFiles = []struct {
	rel  string
	size int64
}{
	{"top.dat", 100 << 10},
	{"empty.dat", 0},
	{"name with space.dat", 10<<10 + 7},
	{"a/one.dat", 1<<20 + 3},
	{"a/b/two.dat", 256 << 10},
	{"a/b/c/three.dat", 1},
	{"a/b/c/d/deep empty.dat", 0},
	{"dir with space/inner file.dat", 2 << 10},
}

// treeEmptyDirs are directories makeTree creates with nothing in them.
var treeEmptyDirs = []string{"empty dir", "a/b/empty"}

// makeTree fills dir with the treeFiles layout of random data.
func makeTree(t testing.TB, dir string) {
	t.Helper()
	for _, d := range treeEmptyDirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range treeFiles {
		writeRandomFile(t, filepath.Join(dir, filepath.FromSlash(f.rel)), f.size)
	}
}

// makeManySmall creates n files of 1–4 KiB random data directly in dir.
func makeManySmall(t testing.TB, dir string, n int) {
	t.Helper()
	makeRandomFiles(t, dir, "small-%04d.dat", n, 1<<10, 4<<10)
}

// makeRandomFiles creates n files of lo to hi bytes of random data directly
// in dir, named by format and their number.
func makeRandomFiles(t testing.TB, dir, format string, n int, lo, hi int64) {
	t.Helper()
	r := rand.New(newRand())
	for i := range n {
		writeRandomFile(t, filepath.Join(dir, fmt.Sprintf(format, i)), lo+r.Int64N(hi-lo+1))
	}
}

// compareFiles reports the first difference between two files.
func compareFiles(want, got string) error {
	wf, err := os.Open(want)
	if err != nil {
		return err
	}
	defer wf.Close()
	gf, err := os.Open(got)
	if err != nil {
		return err
	}
	defer gf.Close()
	ws, _ := wf.Stat()
	gs, _ := gf.Stat()
	if ws.Size() != gs.Size() {
		return fmt.Errorf("%s: size %d, want %d (as %s)", got, gs.Size(), ws.Size(), want)
	}
	if off, ok := firstDiff(wf, gf); !ok {
		return fmt.Errorf("%s differs from %s at offset %d", got, want, off)
	}
	return nil
}

// firstDiff compares two readers; ok is false at the first differing offset.
func firstDiff(a, b io.Reader) (off int64, ok bool) {
	const n = 1 << 20
	ab, bb := make([]byte, n), make([]byte, n)
	for {
		an, aerr := io.ReadFull(a, ab)
		bn, berr := io.ReadFull(b, bb)
		m := min(an, bn)
		if i := mismatch(ab[:m], bb[:m]); i >= 0 {
			return off + int64(i), false
		}
		off += int64(m)
		if an != bn {
			return off, false
		}
		if aerr != nil || berr != nil {
			return off, isEOF(aerr) && isEOF(berr)
		}
	}
}

func isEOF(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// entry is one node of a tree listing.
type entry struct {
	dir  bool
	size int64
}

// listTree maps each slash-separated relative path under root to its entry.
func listTree(root string) (map[string]entry, error) {
	m := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s: unexpected file type %v", p, info.Mode().Type())
		}
		m[filepath.ToSlash(rel)] = entry{dir: d.IsDir(), size: info.Size()}
		return nil
	})
	return m, err
}

// compareTrees checks that got holds exactly the directories and files of
// want with the same bytes. Errors name the paths and offsets that differ.
func compareTrees(want, got string) error {
	wm, err := listTree(want)
	if err != nil {
		return err
	}
	gm, err := listTree(got)
	if err != nil {
		return err
	}
	var errs []error
	for _, rel := range sortedKeys(wm) {
		we := wm[rel]
		ge, ok := gm[rel]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("missing in %s: %s", got, rel))
		case we.dir != ge.dir:
			errs = append(errs, fmt.Errorf("%s: directory in one tree, file in the other", rel))
		case !we.dir:
			if err := compareFiles(filepath.Join(want, rel), filepath.Join(got, rel)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, rel := range sortedKeys(gm) {
		if _, ok := wm[rel]; !ok {
			errs = append(errs, fmt.Errorf("unexpected in %s: %s", got, rel))
		}
	}
	if len(errs) > 20 {
		errs = append(errs[:20], fmt.Errorf("... and %d more differences", len(errs)-20))
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fileSum is the lowercase hex digest of a file.
func fileSum(t testing.TB, path string, h hash.Hash) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func md5File(t testing.TB, path string) string     { return fileSum(t, path, md5.New()) }
func adler32File(t testing.TB, path string) string { return fileSum(t, path, adler32.New()) }

// readFile reads a whole file or fails the test.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirAllocated is the storage allocated to the regular files under root:
// bytes actually written, even when a file was sparse or pre-sized.
func dirAllocated(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return n
}

// copyFile copies src to dst, creating dst's parent directories.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	writeFile(t, dst, readFile(t, src))
}

// bigTempDir is a world-writable temp dir for large files, in /dev/shm when
// it is usable (see sharedTempBase); removed at cleanup.
func bigTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp(sharedTempBase(), "ferry-interop-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// setTreeMtime sets the modification time of every file under root.
func setTreeMtime(t testing.TB, root string, mt time.Time) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, mt, mt)
	})
	if err != nil {
		t.Fatal(err)
	}
}
