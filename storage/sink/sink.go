// Package sink is a storage driver for benchmarks only: a destination that
// takes every write, hashes it and throws the data away, so that a run of
// 100 million files needs neither the disk nor the memory to hold them.
//
// A sink is not a store. It remembers the directories made (they are few)
// and, of files, only the most recently touched (New's remember of them;
// Parse's default is 65,536): each one's size, modification time and
// checksums. What it has forgotten no longer exists: Stat says so, and
// listings show only what it remembers. Nothing written can be read back
// (Open and ReadAt fail with storage.ErrPermission); the checksums of a
// whole file are answered instead (storage.Checksummer), so that a client
// that verifies what it sent — ferry copy, which writes to a temporary
// name, sets the modification time, asks the checksum, then renames —
// works as against a disk, as long as it does so before remember other
// files have been touched: remember must exceed the files in flight (with
// ferry's tar streams, 16,384 were enough for -cc 16 and 4,096 were not).
//
// The data of a file is hashed in one pass, in file order, with each of
// the algorithms the sink was made with (sums; Parse's default is XXH128,
// what ferry picks between two ferry servers). Blocks that arrive ahead of
// a gap (parallel streams) wait in memory until it fills, up to maxPending
// bytes for the whole sink; past that, or when data is written over what
// was hashed, or added after the file was closed, its sums are unknown and
// a checksum of it fails.
package sink

import (
	"container/list"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ferry/checksum"
	"ferry/storage"
)

var (
	_ storage.Driver      = (*FS)(nil)
	_ storage.Checksummer = (*FS)(nil)
)

// Defaults of Parse.
const (
	DefaultRemember   = 65536
	DefaultMaxPending = 64 << 20
)

// FS is a sink. It is safe for concurrent use.
type FS struct {
	sums       []string // canonical algorithm names
	remember   int
	maxPending int64

	mu      sync.Mutex
	dirs    map[string]time.Time // directories made, by name; "/" always
	files   map[string]*list.Element
	lru     list.List // of *file, most recently touched first
	pending int64     // bytes waiting for a gap to fill, in all files
}

// file is what the sink knows of one file.
type file struct {
	name  string
	size  int64 // the end of the data written
	mtime time.Time
	mode  fs.FileMode
	open  int // handles not closed

	hashes []hash.Hash // over [0, next), while the file is open
	next   int64
	ahead  map[int64][]byte // blocks past next, by offset
	sums   []string         // once closed with no gap: the digests, as sums
	broken bool             // the sums cannot be known
}

// New returns a sink that hashes with the algorithms sums, remembers the
// remember most recently touched files and holds at most maxPending bytes
// that arrived ahead of a gap.
func New(sums []string, remember int, maxPending int64) (*FS, error) {
	if remember < 1 || maxPending < 0 {
		return nil, fmt.Errorf("sink: remember %d, max pending %d: want ≥ 1 and ≥ 0", remember, maxPending)
	}
	f := &FS{remember: remember, maxPending: maxPending, dirs: map[string]time.Time{"/": time.Now()}, files: map[string]*list.Element{}}
	for _, s := range sums {
		c, err := checksum.Canonical(s)
		if err != nil {
			return nil, fmt.Errorf("sink: %w", err)
		}
		if !slices.Contains(f.sums, c) {
			f.sums = append(f.sums, c)
		}
	}
	return f, nil
}

// Parse returns the sink that spec describes, as the root "sink:SPEC"
// does: comma-separated sums=ALG+ALG... (default XXH128), remember=N
// (default 65536) and max-pending=BYTES (default 64 MiB), each optional.
func Parse(spec string) (*FS, error) {
	sums, remember, maxPending := []string{checksum.XXH128}, DefaultRemember, int64(DefaultMaxPending)
	for kv := range strings.SplitSeq(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "sums":
			sums = strings.Split(v, "+")
		case "remember":
			remember, err = strconv.Atoi(v)
		case "max-pending":
			maxPending, err = strconv.ParseInt(v, 10, 64)
		default:
			err = errors.New("want sums, remember or max-pending")
		}
		if err != nil {
			return nil, fmt.Errorf("sink: %q: %w", kv, err)
		}
	}
	return New(sums, remember, maxPending)
}

// touch makes e the most recently touched file and forgets the least
// recently touched ones past the bound. Under mu.
func (f *FS) touch(e *list.Element) {
	f.lru.MoveToFront(e)
	for f.lru.Len() > f.remember {
		f.drop(f.lru.Back())
	}
}

// drop forgets a file. Under mu.
func (f *FS) drop(e *list.Element) {
	fl := e.Value.(*file)
	f.lru.Remove(e)
	delete(f.files, fl.name)
	f.release(fl)
}

// release frees the blocks fl holds ahead of a gap. Under mu.
func (f *FS) release(fl *file) {
	for _, b := range fl.ahead {
		f.pending -= int64(len(b))
	}
	fl.ahead = nil
}

// reset empties fl: no data, fresh hashes. Under mu.
func (f *FS) reset(fl *file) {
	f.release(fl)
	fl.size, fl.next, fl.sums, fl.broken = 0, 0, nil, false
	fl.hashes = fl.hashes[:0]
	for _, s := range f.sums {
		h, _ := checksum.New(s)
		fl.hashes = append(fl.hashes, h)
	}
}

// lookup finds the file name, touching it. Under mu.
func (f *FS) lookup(name string) (*file, bool) {
	e, ok := f.files[name]
	if !ok {
		return nil, false
	}
	f.touch(e)
	return e.Value.(*file), true
}

// parent checks that the directory of name exists. Under mu.
func (f *FS) parent(op, name string) error {
	if name == "/" {
		return fmt.Errorf("%s %s: %w", op, name, storage.ErrPermission)
	}
	if _, ok := f.dirs[path.Dir(name)]; !ok {
		return fmt.Errorf("%s %s: %w", op, name, storage.ErrNotExist)
	}
	return nil
}

// Stat describes name, if the sink remembers it.
func (f *FS) Stat(_ context.Context, name string) (storage.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mtime, ok := f.dirs[name]; ok {
		return storage.Info{Name: path.Base(name), Mode: fs.ModeDir | 0o777, ModTime: mtime}, nil
	}
	if fl, ok := f.lookup(name); ok {
		return fl.info(), nil
	}
	return storage.Info{}, fmt.Errorf("stat %s: %w", name, storage.ErrNotExist)
}

func (fl *file) info() storage.Info {
	return storage.Info{Name: path.Base(fl.name), Size: fl.size, Mode: fl.mode, ModTime: fl.mtime}
}

// ReadDir lists what the sink remembers of the directory name: the
// directories made in it and the files it has not forgotten.
func (f *FS) ReadDir(_ context.Context, name string) ([]storage.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.dirs[name]; !ok {
		if _, ok := f.files[name]; ok {
			return nil, fmt.Errorf("readdir %s: %w", name, storage.ErrNotDir)
		}
		return nil, fmt.Errorf("readdir %s: %w", name, storage.ErrNotExist)
	}
	var infos []storage.Info
	for d, mtime := range f.dirs {
		if d != "/" && path.Dir(d) == name {
			infos = append(infos, storage.Info{Name: path.Base(d), Mode: fs.ModeDir | 0o777, ModTime: mtime})
		}
	}
	for e := f.lru.Front(); e != nil; e = e.Next() {
		if fl := e.Value.(*file); path.Dir(fl.name) == name {
			infos = append(infos, fl.info())
		}
	}
	slices.SortFunc(infos, func(a, b storage.Info) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// Open fails: a sink keeps no data.
func (f *FS) Open(_ context.Context, name string) (storage.File, error) {
	return nil, fmt.Errorf("open %s: %w", name, errNoData)
}

var errNoData = fmt.Errorf("a sink keeps no data: %w", storage.ErrPermission)

// Create opens a file for writing: the data written to it is hashed and
// dropped.
func (f *FS) Create(_ context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.dirs[name]; ok {
		return nil, fmt.Errorf("create %s: %w", name, storage.ErrIsDir)
	}
	if err := f.parent("create", name); err != nil {
		return nil, err
	}
	fl, ok := f.lookup(name)
	if !ok {
		fl = &file{name: name, mtime: time.Now(), mode: 0o644}
		f.reset(fl)
		f.files[name] = f.lru.PushFront(fl)
		f.touch(f.files[name])
	} else if flag&storage.Truncate != 0 {
		f.reset(fl)
		fl.mtime = time.Now()
	}
	fl.open++
	return &handle{fs: f, fl: fl}, nil
}

// handle is an open file of the sink.
type handle struct {
	fs     *FS
	fl     *file
	closed bool
}

func (h *handle) ReadAt([]byte, int64) (int, error) { return 0, errNoData }

// WriteAt hashes p if it continues the hashed prefix, holds it if it is
// ahead of a gap, and drops it.
func (h *handle) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("write at %d: %w", off, fs.ErrInvalid)
	}
	f, fl := h.fs, h.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.closed {
		return 0, fs.ErrClosed
	}
	fl.size = max(fl.size, off+int64(len(p)))
	fl.mtime = time.Now()
	switch {
	case fl.broken || len(p) == 0:
	case fl.hashes == nil:
		fl.broken = true // more data after the sums were taken
	case off < fl.next || fl.ahead[off] != nil:
		fl.broken = true // written over what was hashed
		f.release(fl)
	case off > fl.next:
		if f.pending+int64(len(p)) > f.maxPending {
			fl.broken = true
			f.release(fl)
			break
		}
		if fl.ahead == nil {
			fl.ahead = map[int64][]byte{}
		}
		fl.ahead[off] = slices.Clone(p)
		f.pending += int64(len(p))
	default:
		fl.hash(p)
		for b := fl.ahead[fl.next]; b != nil; b = fl.ahead[fl.next] {
			delete(fl.ahead, fl.next)
			f.pending -= int64(len(b))
			fl.hash(b)
		}
	}
	return len(p), nil
}

// hash feeds p, the data at fl.next, to the hashes.
func (fl *file) hash(p []byte) {
	for _, h := range fl.hashes {
		h.Write(p)
	}
	fl.next += int64(len(p))
}

// Close ends the handle; the last one of a file takes its sums.
func (h *handle) Close() error {
	f, fl := h.fs, h.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.closed {
		return fs.ErrClosed
	}
	h.closed = true
	fl.open--
	f.finish(fl)
	return nil
}

// finish takes the sums of fl once no handle has it open. Under mu.
func (f *FS) finish(fl *file) {
	if fl.open > 0 || fl.broken || fl.hashes == nil {
		return
	}
	if fl.next != fl.size || len(fl.ahead) > 0 {
		fl.broken = true // a gap never filled
		f.release(fl)
		return
	}
	for _, h := range fl.hashes {
		fl.sums = append(fl.sums, hex.EncodeToString(h.Sum(nil)))
	}
	fl.hashes = nil
}

// Checksum returns the digest of the whole file name with alg, if the sink
// hashed it with alg and has not forgotten it; errors.ErrUnsupported if it
// did not.
func (f *FS) Checksum(_ context.Context, name, alg string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.lookup(name)
	if !ok {
		if _, ok := f.dirs[name]; ok {
			return "", fmt.Errorf("checksum %s: %w", name, storage.ErrIsDir)
		}
		return "", fmt.Errorf("checksum %s: %w", name, storage.ErrNotExist)
	}
	c, _ := checksum.Canonical(alg)
	i := slices.Index(f.sums, c)
	switch {
	case i < 0:
		return "", fmt.Errorf("checksum %s: the sink hashes with %s, not %s: %w", name, strings.Join(f.sums, ", "), alg, errors.ErrUnsupported)
	case fl.broken || fl.sums == nil:
		return "", fmt.Errorf("checksum %s: written out of order, over itself or still open: %w", name, errors.ErrUnsupported)
	}
	return fl.sums[i], nil
}

// Mkdir makes a directory.
func (f *FS) Mkdir(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.parent("mkdir", name); err != nil {
		return err
	}
	if _, ok := f.dirs[name]; ok {
		return fmt.Errorf("mkdir %s: %w", name, storage.ErrExist)
	}
	if _, ok := f.files[name]; ok {
		return fmt.Errorf("mkdir %s: %w", name, storage.ErrExist)
	}
	f.dirs[name] = time.Now()
	return nil
}

// Remove forgets a file or an empty directory.
func (f *FS) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "/" {
		return fmt.Errorf("remove /: %w", storage.ErrPermission)
	}
	if e, ok := f.files[name]; ok {
		f.drop(e)
		return nil
	}
	if _, ok := f.dirs[name]; !ok {
		return fmt.Errorf("remove %s: %w", name, storage.ErrNotExist)
	}
	if f.inside(name) {
		return fmt.Errorf("remove %s: %w", name, storage.ErrNotEmpty)
	}
	delete(f.dirs, name)
	return nil
}

// inside reports whether anything the sink knows is in the directory dir.
// Under mu.
func (f *FS) inside(dir string) bool {
	for d := range f.dirs {
		if d != "/" && path.Dir(d) == dir {
			return true
		}
	}
	for e := f.lru.Front(); e != nil; e = e.Next() {
		if path.Dir(e.Value.(*file).name) == dir {
			return true
		}
	}
	return false
}

// Rename moves a file, replacing a file at newname, or a directory with
// all it holds.
func (f *FS) Rename(_ context.Context, oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.parent("rename", newname); err != nil {
		return err
	}
	if e, ok := f.files[oldname]; ok {
		if _, ok := f.dirs[newname]; ok {
			return fmt.Errorf("rename %s %s: %w", oldname, newname, storage.ErrIsDir)
		}
		if old, ok := f.files[newname]; ok && old != e {
			f.drop(old)
		}
		fl := e.Value.(*file)
		delete(f.files, oldname)
		fl.name = newname
		f.files[newname] = e
		f.touch(e)
		return nil
	}
	if _, ok := f.dirs[oldname]; !ok || oldname == "/" {
		return fmt.Errorf("rename %s: %w", oldname, storage.ErrNotExist)
	}
	if strings.HasPrefix(newname+"/", oldname+"/") {
		return fmt.Errorf("rename %s into itself: %w", oldname, storage.ErrPermission)
	}
	if _, ok := f.dirs[newname]; ok || f.files[newname] != nil {
		return fmt.Errorf("rename %s %s: %w", oldname, newname, storage.ErrExist)
	}
	moved := func(n string) (string, bool) {
		if n == oldname || strings.HasPrefix(n, oldname+"/") {
			return newname + n[len(oldname):], true
		}
		return n, false
	}
	for d, mtime := range f.dirs {
		if n, ok := moved(d); ok {
			delete(f.dirs, d)
			f.dirs[n] = mtime
		}
	}
	for e := f.lru.Front(); e != nil; e = e.Next() {
		fl := e.Value.(*file)
		if n, ok := moved(fl.name); ok {
			delete(f.files, fl.name)
			fl.name = n
			f.files[n] = e
		}
	}
	return nil
}

// Chmod sets a file's permission bits (a directory's are always 0777).
func (f *FS) Chmod(_ context.Context, name string, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.lookup(name); ok {
		fl.mode = mode.Perm()
		return nil
	}
	if _, ok := f.dirs[name]; ok {
		return nil
	}
	return fmt.Errorf("chmod %s: %w", name, storage.ErrNotExist)
}

// Chtimes sets the modification time.
func (f *FS) Chtimes(_ context.Context, name string, mtime time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.lookup(name); ok {
		fl.mtime = mtime
		return nil
	}
	if _, ok := f.dirs[name]; ok {
		f.dirs[name] = mtime
		return nil
	}
	return fmt.Errorf("chtimes %s: %w", name, storage.ErrNotExist)
}

// Truncate sets the size of a file: to 0 it starts the file again; to
// anything but its size, its sums are unknown.
func (f *FS) Truncate(_ context.Context, name string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.lookup(name)
	if !ok {
		if _, ok := f.dirs[name]; ok {
			return fmt.Errorf("truncate %s: %w", name, storage.ErrIsDir)
		}
		return fmt.Errorf("truncate %s: %w", name, storage.ErrNotExist)
	}
	switch {
	case size < 0:
		return fmt.Errorf("truncate %s to %d: %w", name, size, fs.ErrInvalid)
	case size == 0:
		f.reset(fl)
		f.finish(fl)
	case size != fl.size:
		fl.broken = true
		f.release(fl)
		fl.size = size
	}
	return nil
}
