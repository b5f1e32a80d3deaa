// Package storagetest is the conformance suite every storage driver passes.
//
// A driver's own test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) (storage.Driver, string) {
//			dir := t.TempDir()
//			d, err := posix.New(dir)
//			...
//			return d, dir
//		})
//	}
//
// The constructor is called once per subtest and must return a driver over
// an empty tree. The string is the directory backing the tree on disk, or ""
// when there is none; the suite uses it to plant symlinks and files that a
// client could not create (symlinks pointing out of the tree) and to prove
// that no name reaches outside. Those subtests are skipped when it is "".
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/storage"
)

// Run runs the conformance suite against drivers made by newDriver.
func Run(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	t.Run("WriteAtReadAt", func(t *testing.T) { testWriteAtReadAt(t, newDriver) })
	t.Run("ConcurrentWriteAt", func(t *testing.T) { testConcurrentWriteAt(t, newDriver) })
	t.Run("CreateFlags", func(t *testing.T) { testCreateFlags(t, newDriver) })
	t.Run("CreateErrors", func(t *testing.T) { testCreateErrors(t, newDriver) })
	t.Run("Open", func(t *testing.T) { testOpen(t, newDriver) })
	t.Run("Stat", func(t *testing.T) { testStat(t, newDriver) })
	t.Run("ReadDir", func(t *testing.T) { testReadDir(t, newDriver) })
	t.Run("ListDir", func(t *testing.T) { testListDir(t, newDriver) })
	t.Run("Mkdir", func(t *testing.T) { testMkdir(t, newDriver) })
	t.Run("Remove", func(t *testing.T) { testRemove(t, newDriver) })
	t.Run("Rename", func(t *testing.T) { testRename(t, newDriver) })
	t.Run("Chmod", func(t *testing.T) { testChmod(t, newDriver) })
	t.Run("Chtimes", func(t *testing.T) { testChtimes(t, newDriver) })
	t.Run("Truncate", func(t *testing.T) { testTruncate(t, newDriver) })
	t.Run("DotsInNames", func(t *testing.T) { testDotsInNames(t, newDriver) })
	t.Run("Hostile", func(t *testing.T) { testHostile(t, newDriver) })
}

// ---- helpers ----

func put(t *testing.T, d storage.Driver, name, data string) {
	t.Helper()
	f, err := d.Create(t.Context(), name, storage.Truncate)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		f.Close()
		t.Fatalf("WriteAt(%q): %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close(%q): %v", name, err)
	}
}

func get(t *testing.T, d storage.Driver, name string) string {
	t.Helper()
	data, err := read(t.Context(), d, name)
	if err != nil {
		t.Fatalf("read %q: %v", name, err)
	}
	return data
}

func read(ctx context.Context, d storage.Driver, name string) (string, error) {
	info, err := d.Stat(ctx, name)
	if err != nil {
		return "", err
	}
	f, err := d.Open(ctx, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, info.Size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(err == io.EOF && n == len(buf)) {
		return "", fmt.Errorf("ReadAt: %w", err)
	}
	return string(buf[:n]), nil
}

func mkdir(t *testing.T, d storage.Driver, name string) {
	t.Helper()
	if err := d.Mkdir(t.Context(), name); err != nil {
		t.Fatalf("Mkdir(%q): %v", name, err)
	}
}

func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	t.Errorf("%s: err = %v, want %v", what, err, targets)
}

func wantNotExist(t *testing.T, d storage.Driver, name string) {
	t.Helper()
	_, err := d.Stat(t.Context(), name)
	wantErr(t, "Stat("+name+")", err, storage.ErrNotExist)
}

// ---- files ----

func testWriteAtReadAt(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	ctx := t.Context()
	f, err := d.Create(ctx, "/f", storage.Truncate)
	if err != nil {
		t.Fatal(err)
	}
	writes := []struct {
		off  int64
		data string
	}{
		{0, "hello"},
		{10, "world"},         // leaves a hole of zeros
		{3, "LO"},             // overwrites inside
		{1 << 20, "far away"}, // past a megabyte
	}
	for _, w := range writes {
		if n, err := f.WriteAt([]byte(w.data), w.off); err != nil || n != len(w.data) {
			t.Fatalf("WriteAt(%q, %d) = %d, %v", w.data, w.off, n, err)
		}
	}
	// The writer reads its own writes.
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 10); err != nil || string(buf) != "world" {
		t.Errorf("ReadAt on created file = %q, %v; want \"world\"", buf, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	size := int64(1<<20 + len("far away"))
	info, err := d.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != size {
		t.Errorf("Size = %d, want %d", info.Size, size)
	}

	r, err := d.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reads := []struct {
		off  int64
		n    int
		want string
		eof  bool
	}{
		{0, 5, "helLO", false},
		{3, 4, "LO\x00\x00", false},
		{5, 5, "\x00\x00\x00\x00\x00", false},
		{10, 5, "world", false},
		{12, 3, "rld", false},
		{1 << 20, 8, "far away", false},
		{1<<20 + 4, 10, "away", true},
		{size, 4, "", true},
		{size + 100, 4, "", true},
	}
	for _, c := range reads {
		buf := make([]byte, c.n)
		n, err := r.ReadAt(buf, c.off)
		if got := string(buf[:n]); got != c.want {
			t.Errorf("ReadAt(%d, %d) = %q, want %q", c.off, c.n, got, c.want)
		}
		switch {
		case c.eof && err != io.EOF:
			t.Errorf("ReadAt(%d, %d) err = %v, want io.EOF", c.off, c.n, err)
		case !c.eof && err != nil:
			t.Errorf("ReadAt(%d, %d) err = %v", c.off, c.n, err)
		}
	}
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Errorf("WriteAt on a File from Open succeeded")
	}
}

func testConcurrentWriteAt(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	f, err := d.Create(t.Context(), "/f", storage.Truncate)
	if err != nil {
		t.Fatal(err)
	}
	const streams, block, blocks = 4, 16 << 10, 8
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Go(func() {
			data := bytes.Repeat([]byte{byte('a' + s)}, block)
			// Stream s writes blocks s, s+streams, s+2*streams, ...
			for b := s; b < blocks*streams; b += streams {
				if _, err := f.WriteAt(data, int64(b*block)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := get(t, d, "/f")
	if len(got) != streams*blocks*block {
		t.Fatalf("size = %d, want %d", len(got), streams*blocks*block)
	}
	for b := range blocks * streams {
		want := repeat(byte('a'+b%streams), block)
		if got[b*block:(b+1)*block] != want {
			t.Fatalf("block %d has wrong content", b)
		}
	}
}

func repeat(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }

func testCreateFlags(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	const old = "0123456789"
	tests := []struct {
		name   string
		exists bool
		flag   storage.OpenFlag
		write  string // written at offset 2 when not ""
		want   string
	}{
		{"TruncateNew", false, storage.Truncate, "ab", "\x00\x00ab"},
		{"KeepNew", false, storage.Keep, "ab", "\x00\x00ab"},
		{"TruncateExisting", true, storage.Truncate, "", ""},
		{"TruncateExistingWrite", true, storage.Truncate, "ab", "\x00\x00ab"},
		{"KeepExisting", true, storage.Keep, "", old},
		{"KeepExistingWrite", true, storage.Keep, "ab", "01ab456789"},
		{"KeepExistingWritePastEnd", true, storage.Keep, "abcdefghijkl", "01abcdefghijkl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDriver(t)
			if tt.exists {
				put(t, d, "/f", old)
			}
			f, err := d.Create(t.Context(), "/f", tt.flag)
			if err != nil {
				t.Fatal(err)
			}
			if tt.write != "" {
				if _, err := f.WriteAt([]byte(tt.write), 2); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := get(t, d, "/f"); got != tt.want {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
		})
	}
}

func testCreateErrors(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	mkdir(t, d, "/dir")
	put(t, d, "/file", "x")
	tests := []struct {
		name string
		want []error
	}{
		{"/missing/f", []error{storage.ErrNotExist}},
		{"/dir", []error{storage.ErrIsDir}},
		{"/", []error{storage.ErrIsDir}},
		{"/file/f", []error{storage.ErrNotDir, storage.ErrNotExist}},
	}
	for _, tt := range tests {
		for _, flag := range []storage.OpenFlag{storage.Truncate, storage.Keep} {
			f, err := d.Create(t.Context(), tt.name, flag)
			if err == nil {
				f.Close()
			}
			wantErr(t, fmt.Sprintf("Create(%q, %d)", tt.name, flag), err, tt.want...)
		}
	}
	if got := get(t, d, "/file"); got != "x" {
		t.Errorf("/file = %q after failed creates", got)
	}
}

func testOpen(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	mkdir(t, d, "/dir")
	put(t, d, "/dir/file", "content")
	tests := []struct {
		name string
		want []error // nil: success
	}{
		{"/dir/file", nil},
		{"/missing", []error{storage.ErrNotExist}},
		{"/dir/missing", []error{storage.ErrNotExist}},
		{"/dir", []error{storage.ErrIsDir}},
		{"/", []error{storage.ErrIsDir}},
		{"/dir/file/x", []error{storage.ErrNotDir, storage.ErrNotExist}},
	}
	for _, tt := range tests {
		f, err := d.Open(t.Context(), tt.name)
		if err == nil {
			f.Close()
		}
		if tt.want == nil {
			if err != nil {
				t.Errorf("Open(%q): %v", tt.name, err)
			}
			continue
		}
		wantErr(t, fmt.Sprintf("Open(%q)", tt.name), err, tt.want...)
	}
}

// ---- metadata ----

func testStat(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	before := time.Now().Add(-time.Minute)
	mkdir(t, d, "/dir")
	put(t, d, "/dir/file", "12345")
	after := time.Now().Add(time.Minute)
	tests := []struct {
		name    string
		base    string
		size    int64
		dir     bool
		wantErr []error
	}{
		{name: "/dir/file", base: "file", size: 5},
		{name: "/dir", base: "dir", dir: true},
		{name: "/", dir: true},
		{name: "/missing", wantErr: []error{storage.ErrNotExist}},
		{name: "/dir/missing", wantErr: []error{storage.ErrNotExist}},
		{name: "/missing/x", wantErr: []error{storage.ErrNotExist}},
		{name: "/dir/file/x", wantErr: []error{storage.ErrNotDir, storage.ErrNotExist}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := d.Stat(t.Context(), tt.name)
			if tt.wantErr != nil {
				wantErr(t, "Stat", err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.base != "" && info.Name != tt.base {
				t.Errorf("Name = %q, want %q", info.Name, tt.base)
			}
			if info.IsDir() != tt.dir {
				t.Errorf("IsDir = %v, want %v (mode %v)", info.IsDir(), tt.dir, info.Mode)
			}
			if !tt.dir && !info.Mode.IsRegular() {
				t.Errorf("Mode = %v, want a regular file", info.Mode)
			}
			if info.Size != tt.size {
				t.Errorf("Size = %d, want %d", info.Size, tt.size)
			}
			if info.ModTime.Before(before) || info.ModTime.After(after) {
				t.Errorf("ModTime = %v, want about now", info.ModTime)
			}
		})
	}
}

func testReadDir(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	ctx := t.Context()
	list, err := d.ReadDir(ctx, "/")
	if err != nil || len(list) != 0 {
		t.Fatalf("ReadDir of a new tree = %v, %v; want empty", list, err)
	}
	// Byte order: "B" < "_" < "a" < "b" < "c" < "d".
	put(t, d, "/b", "bb")
	put(t, d, "/a", "a")
	put(t, d, "/c", "ccc")
	put(t, d, "/_", "____")
	put(t, d, "/B", "BBBBB")
	mkdir(t, d, "/d")
	mkdir(t, d, "/d/empty")
	put(t, d, "/d/x", "xxxxxx")

	type entry struct {
		name string
		size int64
		dir  bool
	}
	tests := []struct {
		dir     string
		want    []entry
		wantErr []error
	}{
		{dir: "/", want: []entry{{"B", 5, false}, {"_", 4, false}, {"a", 1, false}, {"b", 2, false}, {"c", 3, false}, {"d", 0, true}}},
		{dir: "/d", want: []entry{{"empty", 0, true}, {"x", 6, false}}},
		{dir: "/d/empty", want: []entry{}},
		{dir: "/a", wantErr: []error{storage.ErrNotDir}},
		{dir: "/missing", wantErr: []error{storage.ErrNotExist}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			list, err := d.ReadDir(ctx, tt.dir)
			if tt.wantErr != nil {
				wantErr(t, "ReadDir", err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]entry, len(list))
			for i, in := range list {
				got[i] = entry{in.Name, in.Size, in.IsDir()}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ReadDir = %v, want %v", got, tt.want)
			}
		})
	}
}

// testListDir checks the optional DirLister: it lists what ReadDir lists,
// each entry once, however many there are; an error from fn stops it.
func testListDir(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	l, ok := d.(storage.DirLister)
	if !ok {
		t.Skip("not a storage.DirLister")
	}
	ctx := t.Context()
	mkdir(t, d, "/big")
	const many = 3000 // more than any sensible batch
	for i := range many {
		put(t, d, fmt.Sprintf("/big/f%04d", i), strings.Repeat("x", i%7))
	}
	mkdir(t, d, "/big/sub")
	mkdir(t, d, "/empty")
	put(t, d, "/file", "x")

	names := func(infos []storage.Info) []string {
		var out []string
		for _, in := range infos {
			out = append(out, fmt.Sprintf("%s %d %v", in.Name, in.Size, in.IsDir()))
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		dir     string
		wantErr []error
	}{
		{dir: "/"},
		{dir: "/big"},
		{dir: "/empty"},
		{dir: "/file", wantErr: []error{storage.ErrNotDir}},
		{dir: "/missing", wantErr: []error{storage.ErrNotExist}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			var got []storage.Info
			err := l.ListDir(ctx, tt.dir, func(in storage.Info) error {
				got = append(got, in)
				return nil
			})
			if tt.wantErr != nil {
				wantErr(t, "ListDir", err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := d.ReadDir(ctx, tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := names(got), names(want); !slices.Equal(g, w) {
				t.Errorf("ListDir gave %d entries, ReadDir %d; they differ", len(g), len(w))
			}
		})
	}

	stop := errors.New("stop")
	calls := 0
	err := l.ListDir(ctx, "/big", func(storage.Info) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ListDir with fn failing: %d calls, %v; want 1 call, %v", calls, err, stop)
	}

	// Entries removed while the listing runs are skipped or listed, never
	// an error, and nothing is listed twice.
	seen := map[string]bool{}
	err = l.ListDir(ctx, "/big", func(in storage.Info) error {
		if seen[in.Name] {
			return fmt.Errorf("%s listed twice", in.Name)
		}
		if len(seen) == 0 {
			for i := range many {
				if err := d.Remove(ctx, fmt.Sprintf("/big/f%04d", i)); err != nil {
					return err
				}
			}
		}
		seen[in.Name] = true
		return nil
	})
	if err != nil {
		t.Errorf("ListDir while its entries are removed: %v", err)
	}
}

func testMkdir(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	put(t, d, "/file", "x")
	tests := []struct {
		name string
		want []error // nil: success
	}{
		{"/new", nil},
		{"/new/sub", nil},
		{"/new", []error{storage.ErrExist}},
		{"/file", []error{storage.ErrExist}},
		{"/", []error{storage.ErrExist}},
		{"/missing/sub", []error{storage.ErrNotExist}},
		{"/file/sub", []error{storage.ErrNotDir, storage.ErrNotExist}},
	}
	for _, tt := range tests {
		err := d.Mkdir(t.Context(), tt.name)
		if tt.want == nil {
			if err != nil {
				t.Errorf("Mkdir(%q): %v", tt.name, err)
				continue
			}
			if info, err := d.Stat(t.Context(), tt.name); err != nil || !info.IsDir() {
				t.Errorf("after Mkdir(%q): Stat = %+v, %v", tt.name, info, err)
			}
			continue
		}
		wantErr(t, fmt.Sprintf("Mkdir(%q)", tt.name), err, tt.want...)
	}
}

func testRemove(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	put(t, d, "/file", "x")
	mkdir(t, d, "/empty")
	mkdir(t, d, "/full")
	put(t, d, "/full/f", "y")
	tests := []struct {
		name string
		want []error // nil: success
	}{
		{"/file", nil},
		{"/empty", nil},
		{"/full", []error{storage.ErrNotEmpty}},
		{"/missing", []error{storage.ErrNotExist}},
		{"/file", []error{storage.ErrNotExist}}, // already removed
		{"/full/f/x", []error{storage.ErrNotDir, storage.ErrNotExist}},
	}
	for _, tt := range tests {
		err := d.Remove(t.Context(), tt.name)
		if tt.want == nil {
			if err != nil {
				t.Errorf("Remove(%q): %v", tt.name, err)
			}
			wantNotExist(t, d, tt.name)
			continue
		}
		wantErr(t, fmt.Sprintf("Remove(%q)", tt.name), err, tt.want...)
	}
	if got := get(t, d, "/full/f"); got != "y" {
		t.Errorf("/full/f = %q after failed Remove of /full", got)
	}
	if err := d.Remove(t.Context(), "/"); err == nil {
		t.Errorf("Remove(/) succeeded")
	}
	if info, err := d.Stat(t.Context(), "/"); err != nil || !info.IsDir() {
		t.Errorf("root after Remove(/): %+v, %v", info, err)
	}
}

func testRename(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	type step struct {
		from, to string
		want     []error // nil: success
	}
	tests := []struct {
		name  string
		steps []step
		files map[string]string // name → content afterwards ("" with gone)
		gone  []string
	}{
		{
			name:  "File",
			steps: []step{{from: "/a", to: "/moved"}},
			files: map[string]string{"/moved": "A", "/b": "B"},
			gone:  []string{"/a"},
		},
		{
			name:  "OverFile",
			steps: []step{{from: "/a", to: "/b"}},
			files: map[string]string{"/b": "A"},
			gone:  []string{"/a"},
		},
		{
			name:  "IntoDir",
			steps: []step{{from: "/a", to: "/dir/a"}},
			files: map[string]string{"/dir/a": "A", "/dir/f": "F"},
			gone:  []string{"/a"},
		},
		{
			name:  "Dir",
			steps: []step{{from: "/dir", to: "/dir2"}},
			files: map[string]string{"/dir2/f": "F"},
			gone:  []string{"/dir", "/dir/f"},
		},
		{
			name:  "Missing",
			steps: []step{{from: "/missing", to: "/x", want: []error{storage.ErrNotExist}}},
			files: map[string]string{"/a": "A"},
			gone:  []string{"/x"},
		},
		{
			name:  "MissingTargetDir",
			steps: []step{{from: "/a", to: "/missing/a", want: []error{storage.ErrNotExist}}},
			files: map[string]string{"/a": "A"},
		},
		{
			name:  "DirOverNonEmptyDir",
			steps: []step{{from: "/other", to: "/dir", want: []error{storage.ErrNotEmpty, storage.ErrExist}}},
			files: map[string]string{"/dir/f": "F", "/other/g": "G"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDriver(t)
			put(t, d, "/a", "A")
			put(t, d, "/b", "B")
			mkdir(t, d, "/dir")
			put(t, d, "/dir/f", "F")
			mkdir(t, d, "/other")
			put(t, d, "/other/g", "G")
			for _, s := range tt.steps {
				err := d.Rename(t.Context(), s.from, s.to)
				what := fmt.Sprintf("Rename(%q, %q)", s.from, s.to)
				if s.want == nil {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					continue
				}
				wantErr(t, what, err, s.want...)
			}
			for name, want := range tt.files {
				if got := get(t, d, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			for _, name := range tt.gone {
				wantNotExist(t, d, name)
			}
		})
	}
	t.Run("Root", func(t *testing.T) {
		d, _ := newDriver(t)
		mkdir(t, d, "/dir")
		if err := d.Rename(t.Context(), "/", "/dir/root"); err == nil {
			t.Errorf("Rename(/, /dir/root) succeeded")
		}
		if err := d.Rename(t.Context(), "/dir", "/"); err == nil {
			t.Errorf("Rename(/dir, /) succeeded")
		}
		if info, err := d.Stat(t.Context(), "/dir"); err != nil || !info.IsDir() {
			t.Errorf("/dir after failed renames: %+v, %v", info, err)
		}
	})
}

func testChmod(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	put(t, d, "/file", "x")
	mkdir(t, d, "/dir")
	tests := []struct {
		name string
		mode fs.FileMode
		want fs.FileMode
	}{
		{"/file", 0o600, 0o600},
		{"/file", 0o640, 0o640},
		{"/file", 0o755, 0o755},
		{"/file", 0o644, 0o644},
		{"/file", fs.ModeSetuid | 0o644, 0o644}, // only permission bits
		{"/dir", 0o700, 0o700},
		{"/dir", 0o755, 0o755},
	}
	for _, tt := range tests {
		if err := d.Chmod(t.Context(), tt.name, tt.mode); err != nil {
			t.Errorf("Chmod(%q, %v): %v", tt.name, tt.mode, err)
			continue
		}
		info, err := d.Stat(t.Context(), tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode.Perm() != tt.want || info.Mode&fs.ModeSetuid != 0 {
			t.Errorf("Chmod(%q, %v): mode %v, want %v", tt.name, tt.mode, info.Mode, tt.want)
		}
		if info.IsDir() != (tt.name == "/dir") {
			t.Errorf("Chmod(%q) changed the type: %v", tt.name, info.Mode)
		}
	}
	wantErr(t, "Chmod(/missing)", d.Chmod(t.Context(), "/missing", 0o644), storage.ErrNotExist)
}

func testChtimes(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	put(t, d, "/file", "x")
	mkdir(t, d, "/dir")
	tests := []struct {
		name  string
		mtime time.Time
	}{
		{"/file", time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)},
		{"/file", time.Date(2020, 5, 17, 10, 20, 30, 123456789, time.UTC)},
		{"/file", time.Date(1999, 12, 31, 23, 59, 59, 0, time.FixedZone("X", 3600))},
		{"/dir", time.Date(2010, 1, 1, 0, 0, 1, 0, time.UTC)},
	}
	for _, tt := range tests {
		if err := d.Chtimes(t.Context(), tt.name, tt.mtime); err != nil {
			t.Errorf("Chtimes(%q, %v): %v", tt.name, tt.mtime, err)
			continue
		}
		info, err := d.Stat(t.Context(), tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := info.ModTime.Truncate(time.Second), tt.mtime.Truncate(time.Second); !got.Equal(want) {
			t.Errorf("Chtimes(%q, %v): ModTime = %v", tt.name, want, got)
		}
	}
	wantErr(t, "Chtimes(/missing)", d.Chtimes(t.Context(), "/missing", time.Now()), storage.ErrNotExist)
}

func testTruncate(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	put(t, d, "/file", "0123456789")
	mkdir(t, d, "/dir")
	tests := []struct {
		size int64
		want string
	}{
		{10, "0123456789"},
		{4, "0123"},
		{8, "0123\x00\x00\x00\x00"},
		{0, ""},
		{3, "\x00\x00\x00"},
	}
	for _, tt := range tests {
		if err := d.Truncate(t.Context(), "/file", tt.size); err != nil {
			t.Errorf("Truncate(%d): %v", tt.size, err)
			continue
		}
		if got := get(t, d, "/file"); got != tt.want {
			t.Errorf("Truncate(%d): content %q, want %q", tt.size, got, tt.want)
		}
	}
	wantErr(t, "Truncate(/missing)", d.Truncate(t.Context(), "/missing", 0), storage.ErrNotExist)
	wantErr(t, "Truncate(/dir)", d.Truncate(t.Context(), "/dir", 0), storage.ErrIsDir)
	if err := d.Truncate(t.Context(), "/file", -1); err == nil {
		t.Errorf("Truncate(-1) succeeded")
	}
}

// testDotsInNames checks that names merely containing dots are ordinary.
func testDotsInNames(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	d, _ := newDriver(t)
	names := []string{"a..b", "..c", "c..", "...", ".hidden"}
	for _, n := range names {
		put(t, d, "/"+n, n)
	}
	mkdir(t, d, "/..dir")
	put(t, d, "/..dir/..f", "inner")
	for _, n := range names {
		if got := get(t, d, "/"+n); got != n {
			t.Errorf("/%s = %q", n, got)
		}
	}
	if got := get(t, d, "/..dir/..f"); got != "inner" {
		t.Errorf("/..dir/..f = %q", got)
	}
	list, err := d.ReadDir(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range list {
		got = append(got, in.Name)
	}
	want := append(slices.Clone(names), "..dir")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ReadDir = %q, want %q", got, want)
	}
}

// ---- hostile names ----

// hostile is a tree with symlinks planted on disk, next to a directory
// outside it that must stay out of reach.
type hostile struct {
	d       storage.Driver
	dir     string // the tree on disk
	outside string // a directory beside it
	secret  string // a file in outside
	before  map[string]string
}

const secretContent = "top secret"

func newHostile(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) *hostile {
	d, dir := newDriver(t)
	if dir == "" {
		t.Skip("driver has no directory on disk")
	}
	h := &hostile{d: d, dir: dir, outside: t.TempDir()}
	h.secret = filepath.Join(h.outside, "secret")
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, os.WriteFile(h.secret, []byte(secretContent), 0o644))
	must(t, os.Chtimes(h.secret, old, old))
	must(t, os.Mkdir(filepath.Join(h.outside, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(h.outside, "sub", "inner"), []byte(secretContent), 0o644))

	put(t, d, "/data.txt", "data")
	mkdir(t, d, "/sub")
	put(t, d, "/sub/file", "subfile")

	// Escaping symlinks.
	h.link(t, "abs-file", h.secret)
	h.link(t, "rel-file", h.rel(t, "", h.secret))
	h.link(t, "abs-dir", h.outside)
	h.link(t, "rel-dir", h.rel(t, "", h.outside))
	h.link(t, "sub/deep-rel-dir", h.rel(t, "sub", h.outside))
	h.link(t, "sub/climb", "../"+h.rel(t, "", h.secret)) // back up through the tree
	h.link(t, "sub/climb-dir", "../sub/../"+h.rel(t, "", h.outside))
	h.link(t, "chain1", "chain2")
	h.link(t, "chain2", "sub/chain3")
	h.link(t, "sub/chain3", h.rel(t, "sub", h.secret))
	h.link(t, "chain-dir", "sub/chain-dir2")
	h.link(t, "sub/chain-dir2", h.outside)
	h.link(t, "dangling-abs", filepath.Join(h.outside, "new-abs"))
	h.link(t, "dangling-rel", h.rel(t, "", filepath.Join(h.outside, "new-rel")))
	h.link(t, "gooddir-out", "sub/../rel-dir") // inside link to an escaping link
	// Loops.
	h.link(t, "loop1", "loop2")
	h.link(t, "loop2", "loop1")
	// Symlinks that stay inside.
	h.link(t, "good", "data.txt")
	h.link(t, "gooddir", "sub")
	h.link(t, "sub/up", "../data.txt")

	h.before = snapshot(t, h.outside)
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *hostile) link(t *testing.T, name, target string) {
	t.Helper()
	must(t, os.Symlink(target, filepath.Join(h.dir, filepath.FromSlash(name))))
}

// rel returns target relative to the directory from (relative to the tree).
func (h *hostile) rel(t *testing.T, from, target string) string {
	t.Helper()
	r, err := filepath.Rel(filepath.Join(h.dir, filepath.FromSlash(from)), target)
	must(t, err)
	return r
}

// snapshot describes every entry below dir: content, mode and mtime.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %v", fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		}
		m[p] = desc
		return nil
	})
	must(t, err)
	return m
}

// check fails the test if anything outside changed.
func (h *hostile) check(t *testing.T) {
	t.Helper()
	after := snapshot(t, h.outside)
	for p, desc := range after {
		if b, ok := h.before[p]; !ok {
			t.Errorf("created outside the tree: %s", p)
		} else if b != desc {
			t.Errorf("changed outside the tree: %s: %s, was %s", p, desc, b)
		}
	}
	for p := range h.before {
		if _, ok := after[p]; !ok {
			t.Errorf("removed outside the tree: %s", p)
		}
	}
}

// attempt is one operation that must be refused with ErrPermission.
type attempt struct {
	what string
	do   func(ctx context.Context, d storage.Driver) error
}

func fileAttempts(name string) []attempt {
	return []attempt{
		{"Open", func(ctx context.Context, d storage.Driver) error {
			data, err := read(ctx, d, name)
			if err == nil && data == secretContent {
				return errors.New("read the secret")
			}
			return err
		}},
		{"CreateKeep", func(ctx context.Context, d storage.Driver) error { return create(ctx, d, name, storage.Keep) }},
		{"CreateTruncate", func(ctx context.Context, d storage.Driver) error { return create(ctx, d, name, storage.Truncate) }},
		{"Truncate", func(ctx context.Context, d storage.Driver) error { return d.Truncate(ctx, name, 1) }},
		{"Chmod", func(ctx context.Context, d storage.Driver) error { return d.Chmod(ctx, name, 0o600) }},
		{"Chtimes", func(ctx context.Context, d storage.Driver) error { return d.Chtimes(ctx, name, time.Now()) }},
	}
}

func create(ctx context.Context, d storage.Driver, name string, flag storage.OpenFlag) error {
	f, err := d.Create(ctx, name, flag)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte("pwned"), 0)
	f.Close()
	if err == nil {
		return errors.New("wrote through it")
	}
	return err
}

// join joins without cleaning, which would drop a leading "/..".
func join(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name }

// inAttempts are attempts on names below dir, which leads outside.
func inAttempts(dir string) []attempt {
	secret := join(dir, "secret")
	as := []attempt{
		{"ReadDir", func(ctx context.Context, d storage.Driver) error {
			list, err := d.ReadDir(ctx, dir)
			if err == nil {
				return fmt.Errorf("listed %d entries", len(list))
			}
			return err
		}},
		{"StatSecret", func(ctx context.Context, d storage.Driver) error {
			_, err := d.Stat(ctx, secret)
			return err
		}},
		{"StatMissing", func(ctx context.Context, d storage.Driver) error {
			_, err := d.Stat(ctx, join(dir, "missing"))
			return err
		}},
		{"ReadDirSub", func(ctx context.Context, d storage.Driver) error {
			_, err := d.ReadDir(ctx, join(dir, "sub"))
			return err
		}},
		{"CreateNew", func(ctx context.Context, d storage.Driver) error {
			return create(ctx, d, join(dir, "new"), storage.Truncate)
		}},
		{"Mkdir", func(ctx context.Context, d storage.Driver) error { return d.Mkdir(ctx, join(dir, "newdir")) }},
		{"Remove", func(ctx context.Context, d storage.Driver) error { return d.Remove(ctx, secret) }},
		{"RemoveDir", func(ctx context.Context, d storage.Driver) error { return d.Remove(ctx, join(dir, "sub")) }},
		{"RenameIn", func(ctx context.Context, d storage.Driver) error {
			return d.Rename(ctx, "/data.txt", join(dir, "moved"))
		}},
		{"RenameOver", func(ctx context.Context, d storage.Driver) error { return d.Rename(ctx, "/data.txt", secret) }},
		{"RenameOut", func(ctx context.Context, d storage.Driver) error { return d.Rename(ctx, secret, "/stolen") }},
	}
	return append(as, fileAttempts(secret)...)
}

func (h *hostile) refuse(t *testing.T, name string, as []attempt) {
	t.Helper()
	for _, a := range as {
		err := a.do(t.Context(), h.d)
		wantErr(t, fmt.Sprintf("%s %s", a.what, name), err, storage.ErrPermission)
	}
}

func testHostile(t *testing.T, newDriver func(t *testing.T) (storage.Driver, string)) {
	t.Run("EscapingFileLinks", func(t *testing.T) {
		h := newHostile(t, newDriver)
		for _, name := range []string{"/abs-file", "/rel-file", "/sub/climb", "/chain1", "/chain2", "/sub/chain3"} {
			t.Run(name, func(t *testing.T) {
				info, err := h.d.Stat(t.Context(), name)
				if err != nil {
					t.Errorf("Stat: %v", err)
				} else if info.Mode&fs.ModeSymlink == 0 || info.Target == "" {
					t.Errorf("Stat = %+v, want a symlink with its target", info)
				}
				h.refuse(t, name, fileAttempts(name))
			})
		}
		h.check(t)
		if _, err := os.Stat(filepath.Join(h.dir, "stolen")); err == nil {
			t.Errorf("the secret was moved into the tree")
		}
	})
	t.Run("EscapingDirLinks", func(t *testing.T) {
		h := newHostile(t, newDriver)
		for _, name := range []string{"/abs-dir", "/rel-dir", "/sub/deep-rel-dir", "/sub/climb-dir", "/chain-dir", "/gooddir-out"} {
			t.Run(name, func(t *testing.T) {
				info, err := h.d.Stat(t.Context(), name)
				if err != nil {
					t.Errorf("Stat: %v", err)
				} else if info.Mode&fs.ModeSymlink == 0 {
					t.Errorf("Stat = %+v, want a symlink", info)
				}
				h.refuse(t, name, inAttempts(name))
			})
		}
		if got := get(t, h.d, "/data.txt"); got != "data" {
			t.Errorf("/data.txt = %q", got)
		}
		h.check(t)
	})
	t.Run("DanglingLinks", func(t *testing.T) {
		h := newHostile(t, newDriver)
		for _, name := range []string{"/dangling-abs", "/dangling-rel"} {
			t.Run(name, func(t *testing.T) {
				info, err := h.d.Stat(t.Context(), name)
				if err != nil {
					t.Errorf("Stat: %v", err)
				} else if info.Mode&fs.ModeSymlink == 0 {
					t.Errorf("Stat = %+v, want a symlink", info)
				}
				for _, flag := range []storage.OpenFlag{storage.Truncate, storage.Keep} {
					err := create(t.Context(), h.d, name, flag)
					wantErr(t, fmt.Sprintf("Create(%d)", flag), err, storage.ErrPermission)
				}
			})
		}
		h.check(t)
	})
	t.Run("DotDot", func(t *testing.T) {
		h := newHostile(t, newDriver)
		up := filepath.ToSlash(h.rel(t, "", h.outside)) // "../xyz"
		names := []string{
			"/" + up,
			up,
			"/sub/../" + up,
			"/sub/../sub/../" + up,
		}
		for _, name := range names {
			t.Run(name, func(t *testing.T) { h.refuse(t, name, inAttempts(name)) })
		}
		for _, name := range []string{"/..", "..", "/../..", "/sub/../.."} {
			_, err := h.d.ReadDir(t.Context(), name)
			wantErr(t, "ReadDir("+name+")", err, storage.ErrPermission)
			_, err = h.d.Stat(t.Context(), name)
			wantErr(t, "Stat("+name+")", err, storage.ErrPermission)
		}
		h.check(t)
	})
	t.Run("Loops", func(t *testing.T) {
		h := newHostile(t, newDriver)
		for _, name := range []string{"/loop1", "/loop2"} {
			info, err := h.d.Stat(t.Context(), name)
			if err != nil {
				t.Errorf("Stat(%s): %v", name, err)
			} else if info.Mode&fs.ModeSymlink == 0 {
				t.Errorf("Stat(%s) = %+v, want a symlink", name, info)
			}
			if f, err := h.d.Open(t.Context(), name); err == nil {
				f.Close()
				t.Errorf("Open(%s) succeeded", name)
			}
			if err := create(t.Context(), h.d, name, storage.Keep); err == nil {
				t.Errorf("Create(%s) succeeded", name)
			}
		}
		h.check(t)
	})
	t.Run("InsideLinks", func(t *testing.T) {
		h := newHostile(t, newDriver)
		ctx := t.Context()
		info, err := h.d.Stat(ctx, "/good")
		if err != nil || !info.Mode.IsRegular() || info.Size != 4 || info.Name != "good" || info.Target != "data.txt" {
			t.Errorf("Stat(/good) = %+v, %v; want a 4-byte regular file named good, target data.txt", info, err)
		}
		if got := get(t, h.d, "/good"); got != "data" {
			t.Errorf("/good = %q", got)
		}
		if got := get(t, h.d, "/sub/up"); got != "data" {
			t.Errorf("/sub/up = %q", got)
		}
		if got := get(t, h.d, "/gooddir/file"); got != "subfile" {
			t.Errorf("/gooddir/file = %q", got)
		}
		info, err = h.d.Stat(ctx, "/gooddir")
		if err != nil || !info.IsDir() || info.Target != "sub" {
			t.Errorf("Stat(/gooddir) = %+v, %v; want a directory, target sub", info, err)
		}
		put(t, h.d, "/gooddir/new", "new")
		if got := get(t, h.d, "/sub/new"); got != "new" {
			t.Errorf("/sub/new = %q", got)
		}
		list, err := h.d.ReadDir(ctx, "/gooddir")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range list {
			names = append(names, in.Name)
		}
		if !slices.Contains(names, "file") || !slices.Contains(names, "up") {
			t.Errorf("ReadDir(/gooddir) = %q", names)
		}
		h.check(t)
	})
	t.Run("Listing", func(t *testing.T) {
		h := newHostile(t, newDriver)
		list, err := h.d.ReadDir(t.Context(), "/")
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]storage.Info{}
		for _, in := range list {
			byName[in.Name] = in
			if in.Name == "secret" {
				t.Errorf("the listing shows %q from outside", in.Name)
			}
		}
		for _, name := range []string{"abs-file", "rel-file", "abs-dir", "rel-dir", "chain1", "chain-dir", "dangling-abs", "loop1"} {
			in, ok := byName[name]
			if !ok {
				t.Errorf("ReadDir(/) lacks %s", name)
				continue
			}
			if in.Mode&fs.ModeSymlink == 0 {
				t.Errorf("ReadDir(/): %s = %+v, want a symlink", name, in)
			}
			if in.Size == int64(len(secretContent)) {
				t.Errorf("ReadDir(/): %s has the size of the secret", name)
			}
		}
		if in := byName["good"]; !in.Mode.IsRegular() || in.Size != 4 || in.Target != "data.txt" {
			t.Errorf("ReadDir(/): good = %+v, want a 4-byte regular file, target data.txt", in)
		}
		if in := byName["gooddir"]; !in.IsDir() {
			t.Errorf("ReadDir(/): gooddir = %+v, want a directory", in)
		}
		h.check(t)
	})
}
