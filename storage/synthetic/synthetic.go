// Package synthetic is a storage driver for benchmarks only: a read-only
// tree of generated files that lives in no disk and almost no memory, so
// that a source of 100 million files fits on any machine.
//
// The tree is set by four numbers: Files files of Size bytes each, PerDir
// of them in each leaf directory, leaves grouped Fan to a parent directory,
// parents Fan to theirs, up to the root (a tree of one leaf has its files
// in the root). The files are numbered from 0 in name order; file i is in
// leaf i/PerDir at position i%PerDir. Directory names are "d" and file
// names "f" followed by the number within the parent, zero-padded to one
// width per kind: with the defaults (PerDir and Fan 1000), file 1,234,567
// of 100 million is /d001/d234/f567.
//
// A file's content is a function of its number and the offset alone, so a
// reader anywhere can check what arrived (Read). Every entry has the same
// modification time (ModTime). Listing a directory streams its entries
// (storage.DirLister) without building them all; writes of any kind are
// refused with storage.ErrPermission.
package synthetic

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"ferry/storage"
)

var (
	_ storage.Driver    = (*FS)(nil)
	_ storage.DirLister = (*FS)(nil)
)

// ModTime is the modification time of every entry.
var ModTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Tree is the shape of a synthetic tree.
type Tree struct {
	Files  int64 // files in the tree
	Size   int64 // bytes in each file
	PerDir int64 // files in each leaf directory, at least 1
	Fan    int64 // directories in each parent, at least 2
}

// FS serves a Tree. It is safe for concurrent use.
type FS struct {
	t      Tree
	leaves int64 // leaf directories
	depth  int   // directories from the root to a leaf
	span   []int64
	dirW   int // digits of a directory's number
	fileW  int // digits of a file's number
}

// New returns the driver of the tree t.
func New(t Tree) (*FS, error) {
	if t.Files < 0 || t.Size < 0 || t.PerDir < 1 || t.Fan < 2 {
		return nil, fmt.Errorf("synthetic: %+v: want files ≥ 0, size ≥ 0, per-dir ≥ 1, fan ≥ 2", t)
	}
	f := &FS{t: t, leaves: (t.Files + t.PerDir - 1) / t.PerDir}
	// span[k] is the number of leaves below a directory at depth k.
	f.span = []int64{1}
	for f.span[0] < f.leaves {
		if f.span[0] > (1<<62)/t.Fan {
			return nil, fmt.Errorf("synthetic: %+v: too many files", t)
		}
		f.span = append([]int64{f.span[0] * t.Fan}, f.span...)
	}
	f.depth = len(f.span) - 1
	f.dirW = len(strconv.FormatInt(t.Fan-1, 10))
	f.fileW = len(strconv.FormatInt(t.PerDir-1, 10))
	return f, nil
}

// Parse returns the driver of the tree that spec describes, as the root
// "synthetic:SPEC" does: comma-separated files=N, size=BYTES, per-dir=N
// and fan=N, each optional (defaults: 1000 files of 10 bytes, 1000 per
// directory and 1000 directories per parent).
func Parse(spec string) (*FS, error) {
	t := Tree{Files: 1000, Size: 10, PerDir: 1000, Fan: 1000}
	for kv := range strings.SplitSeq(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("synthetic: %q: not a number", kv)
		}
		switch k {
		case "files":
			t.Files = n
		case "size":
			t.Size = n
		case "per-dir":
			t.PerDir = n
		case "fan":
			t.Fan = n
		default:
			return nil, fmt.Errorf("synthetic: %q: want files, size, per-dir or fan", kv)
		}
	}
	return New(t)
}

// Tree returns the shape of the tree.
func (f *FS) Tree() Tree { return f.t }

// Path returns the name of file i.
func (f *FS) Path(i int64) string {
	var b strings.Builder
	leaf := i / f.t.PerDir
	for k := 1; k <= f.depth; k++ {
		b.WriteString("/d")
		b.WriteString(pad(leaf/f.span[k]%f.t.Fan, f.dirW))
	}
	b.WriteString("/f")
	b.WriteString(pad(i%f.t.PerDir, f.fileW))
	return b.String()
}

func pad(n int64, width int) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", width-len(s)) + s
}

// number reads a name of prefix and width digits.
func number(name string, prefix byte, width int) (int64, bool) {
	if len(name) != 1+width || name[0] != prefix {
		return 0, false
	}
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(name[1:], 10, 64)
	return n, err == nil
}

// entry is what a name resolves to: the directory at depth with first
// leaf, or (file ≥ 0) file number file.
type entry struct {
	depth int
	leaf  int64
	file  int64
}

// resolve finds name in the tree.
func (f *FS) resolve(op, name string) (entry, error) {
	e := entry{file: -1}
	notExist := fmt.Errorf("%s %s: %w", op, name, storage.ErrNotExist)
	rest := strings.TrimPrefix(name, "/")
	for rest != "" {
		var elem string
		elem, rest, _ = strings.Cut(rest, "/")
		if e.file >= 0 {
			return e, notExist
		}
		if e.depth < f.depth {
			n, ok := number(elem, 'd', f.dirW)
			if !ok || n >= f.t.Fan {
				return e, notExist
			}
			e.depth++
			e.leaf += n * f.span[e.depth]
			if e.leaf >= f.leaves {
				return e, notExist
			}
			continue
		}
		n, ok := number(elem, 'f', f.fileW)
		if !ok || n >= f.t.PerDir || e.leaf*f.t.PerDir+n >= f.t.Files {
			return e, notExist
		}
		e.file = e.leaf*f.t.PerDir + n
	}
	return e, nil
}

func (f *FS) dirInfo(name string) storage.Info {
	return storage.Info{Name: name, Mode: fs.ModeDir | 0o555, ModTime: ModTime}
}

func (f *FS) fileInfo(name string) storage.Info {
	return storage.Info{Name: name, Size: f.t.Size, Mode: 0o444, ModTime: ModTime}
}

// Stat describes name.
func (f *FS) Stat(_ context.Context, name string) (storage.Info, error) {
	e, err := f.resolve("stat", name)
	if err != nil {
		return storage.Info{}, err
	}
	base := name[strings.LastIndexByte(name, '/')+1:]
	if base == "" {
		base = "/"
	}
	if e.file >= 0 {
		return f.fileInfo(base), nil
	}
	return f.dirInfo(base), nil
}

// ListDir calls fn with each entry of the directory name, in name order,
// making one at a time.
func (f *FS) ListDir(_ context.Context, name string, fn func(storage.Info) error) error {
	e, err := f.resolve("list", name)
	if err != nil {
		return err
	}
	if e.file >= 0 {
		return fmt.Errorf("list %s: %w", name, storage.ErrNotDir)
	}
	if e.depth < f.depth {
		step := f.span[e.depth+1]
		for n := int64(0); n < f.t.Fan && e.leaf+n*step < f.leaves; n++ {
			if err := fn(f.dirInfo("d" + pad(n, f.dirW))); err != nil {
				return err
			}
		}
		return nil
	}
	for n := int64(0); n < f.t.PerDir && e.leaf*f.t.PerDir+n < f.t.Files; n++ {
		if err := fn(f.fileInfo("f" + pad(n, f.fileW))); err != nil {
			return err
		}
	}
	return nil
}

// ReadDir lists the directory name, sorted by name.
func (f *FS) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	var infos []storage.Info
	err := f.ListDir(ctx, name, func(i storage.Info) error {
		infos = append(infos, i)
		return nil
	})
	return infos, err
}

// Open opens a file for reading.
func (f *FS) Open(_ context.Context, name string) (storage.File, error) {
	e, err := f.resolve("open", name)
	if err != nil {
		return nil, err
	}
	if e.file < 0 {
		return nil, fmt.Errorf("open %s: %w", name, storage.ErrIsDir)
	}
	return file{i: e.file, size: f.t.Size}, nil
}

// Read fills p with the content of file i from offset off, as ReadAt of
// an open file does.
func Read(i int64, p []byte, off int64) {
	for len(p) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], word(i, off/8))
		n := copy(p, w[off%8:])
		p, off = p[n:], off+int64(n)
	}
}

// word is the 8 bytes of file i at offset 8k: SplitMix64 of both.
func word(i, k int64) uint64 {
	z := uint64(i)*0x9e3779b97f4a7c15 + uint64(k)*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// file is an open file of the tree.
type file struct {
	i, size int64
}

func (r file) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at %d: %w", off, fs.ErrInvalid)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-off))
	Read(r.i, p[:n], off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r file) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly("write") }
func (r file) Close() error                       { return nil }

func errReadOnly(op string) error {
	return fmt.Errorf("%s: a synthetic tree is read-only: %w", op, storage.ErrPermission)
}

// Create is refused: the tree is read-only.
func (f *FS) Create(context.Context, string, storage.OpenFlag) (storage.File, error) {
	return nil, errReadOnly("create")
}

// Mkdir is refused: the tree is read-only.
func (f *FS) Mkdir(context.Context, string) error { return errReadOnly("mkdir") }

// Remove is refused: the tree is read-only.
func (f *FS) Remove(context.Context, string) error { return errReadOnly("remove") }

// Rename is refused: the tree is read-only.
func (f *FS) Rename(context.Context, string, string) error { return errReadOnly("rename") }

// Chmod is refused: the tree is read-only.
func (f *FS) Chmod(context.Context, string, fs.FileMode) error { return errReadOnly("chmod") }

// Chtimes is refused: the tree is read-only.
func (f *FS) Chtimes(context.Context, string, time.Time) error { return errReadOnly("chtimes") }

// Truncate is refused: the tree is read-only.
func (f *FS) Truncate(context.Context, string, int64) error { return errReadOnly("truncate") }
