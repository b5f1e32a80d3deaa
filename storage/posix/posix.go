package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"ferry/storage"
)

var (
	_ storage.Driver    = (*FS)(nil)
	_ storage.DirOpener = (*FS)(nil)
	_ storage.DirLister = (*FS)(nil)
)

// FS serves the tree below one directory. It is safe for concurrent use;
// set FileMode and DirMode, if at all, before sharing it.
type FS struct {
	// FileMode is the mode new files are created with (before the umask).
	FileMode fs.FileMode
	// DirMode is the mode new directories are created with (before the umask).
	DirMode fs.FileMode

	root   *os.Root
	escape error // the error os.Root reports for a path that leaves the root
}

// New opens dir as the root of a tree. Close releases it.
func New(dir string) (*FS, error) {
	// Check first: os.OpenRoot would block on a FIFO and reports a
	// non-directory with an error of its own.
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("posix: root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("posix: root %s: %w", dir, storage.ErrNotDir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("posix: root: %w", err)
	}
	return &FS{
		FileMode: 0o666,
		DirMode:  0o777,
		root:     root,
		escape:   escapeError(root),
	}, nil
}

// escapeError learns the (unexported) error value os.Root uses for "path
// escapes from parent", so that errors.Is can recognise it.
func escapeError(root *os.Root) error {
	_, err := root.Lstat("..")
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return errors.New("path escapes from parent") // never matched
}

// Close releases the root directory.
func (f *FS) Close() error { return f.root.Close() }

// Dir returns the directory the FS was opened on.
func (f *FS) Dir() string { return f.root.Name() }

// rel turns a driver name ("/a/b") into a name relative to the root
// ("a/b", or "." for the root). Any ".." element is refused outright: Clean
// never leaves one, so its presence means a caller skipped Clean.
func (f *FS) rel(op, name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%s %q: %w", op, name, fs.ErrInvalid)
	}
	r := strings.Trim(name, "/")
	for elem := range strings.SplitSeq(r, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%s %s: %w", op, name, storage.ErrPermission)
		}
	}
	if r == "" {
		r = "."
	}
	return r, nil
}

// wrap maps an error from the os package to one of storage's sentinels and
// names the file by its driver name, never by its path on disk.
func (f *FS) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	inner := err
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		inner = pe.Err
	} else if le, ok := errors.AsType[*os.LinkError](err); ok {
		inner = le.Err
	}
	if sentinel := f.sentinel(inner); sentinel != nil {
		return fmt.Errorf("%s %s: %w", op, name, sentinel)
	}
	return fmt.Errorf("%s %s: %w", op, name, inner)
}

func (f *FS) sentinel(err error) error {
	if errors.Is(err, f.escape) {
		return storage.ErrPermission
	}
	errno, ok := errors.AsType[syscall.Errno](err)
	if !ok {
		return nil
	}
	switch errno {
	case syscall.ENOENT:
		return storage.ErrNotExist
	case syscall.EEXIST:
		return storage.ErrExist
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		return storage.ErrPermission
	case syscall.ENOTEMPTY:
		return storage.ErrNotEmpty
	case syscall.ENOTDIR:
		return storage.ErrNotDir
	case syscall.EISDIR:
		return storage.ErrIsDir
	case syscall.ENOSPC, syscall.EDQUOT:
		return storage.ErrNoSpace
	}
	return nil
}

// isRoot reports whether a relative name is the root itself.
func isRoot(rel string) bool { return rel == "." }

// Stat describes name. A symlink that stays inside the root is described as
// its target, with Target set; one that does not is described as a symlink.
func (f *FS) Stat(ctx context.Context, name string) (storage.Info, error) {
	if err := ctx.Err(); err != nil {
		return storage.Info{}, err
	}
	r, err := f.rel("stat", name)
	if err != nil {
		return storage.Info{}, err
	}
	info, err := stat(f.root, r)
	if err != nil {
		return storage.Info{}, f.wrap("stat", name, err)
	}
	if isRoot(r) {
		info.Name = "/"
	}
	return info, nil
}

// stat implements Stat on a name relative to root and returns unwrapped
// errors.
func stat(root *os.Root, r string) (storage.Info, error) {
	lfi, err := root.Lstat(r)
	if err != nil {
		return storage.Info{}, err
	}
	if lfi.Mode()&fs.ModeSymlink == 0 {
		return info(lfi, ""), nil
	}
	target, err := root.Readlink(r)
	if err != nil {
		return storage.Info{}, err
	}
	fi, err := root.Stat(r)
	if err != nil {
		// Leads out, dangles or loops: describe the link itself.
		return info(lfi, target), nil
	}
	in := info(fi, target)
	in.Name = lfi.Name()
	return in, nil
}

func info(fi fs.FileInfo, target string) storage.Info {
	in := storage.Info{
		Name:    fi.Name(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
		Target:  target,
	}
	if fi.Mode().IsRegular() {
		in.Size = fi.Size()
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		in.ID = fmt.Sprintf("%x-%x", st.Dev, st.Ino)
	}
	return in
}

// ReadDir lists a directory, sorted by name. Entries are described as Stat
// describes them.
func (f *FS) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	var out []storage.Info
	err := f.list(ctx, "readdir", name, func(in storage.Info) error {
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b storage.Info) int { return strings.Compare(a.Name, b.Name) })
	if out == nil {
		out = []storage.Info{}
	}
	return out, nil
}

// listBatch is how many entries ListDir reads from the directory at once.
const listBatch = 1024

// ListDir calls fn with each entry of a directory, in the order the
// directory yields them, described as ReadDir describes them. It reads
// listBatch entries at a time, so a directory of millions of entries
// costs the memory of a few thousand; an entry removed meanwhile is
// skipped.
func (f *FS) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	return f.list(ctx, "listdir", name, fn)
}

// list implements ListDir for the operation op.
func (f *FS) list(ctx context.Context, op, name string, fn func(storage.Info) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := f.rel(op, name)
	if err != nil {
		return err
	}
	// O_DIRECTORY: a FIFO planted in the tree must fail, not block. The
	// entries of a directory opened in a Root are described with fstatat on
	// its descriptor as they are read (an entry removed meanwhile is
	// skipped): one system call per entry, and no path to race.
	d, err := f.root.OpenFile(r, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return f.wrap(op, name, err)
	}
	defer d.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, rerr := d.ReadDir(listBatch)
		for _, e := range entries {
			in, err := f.describe(r, e)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				return f.wrap(op, path.Join(name, e.Name()), err)
			}
			if err := fn(in); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return f.wrap(op, name, rerr)
		}
	}
}

// describe describes the entry e of the directory r (relative to the
// root) as Stat does.
func (f *FS) describe(r string, e fs.DirEntry) (storage.Info, error) {
	lfi, err := e.Info()
	if err != nil {
		return storage.Info{}, err
	}
	if lfi.Mode()&fs.ModeSymlink == 0 {
		return info(lfi, ""), nil
	}
	// Resolve links from the top root: a relative link may climb out of
	// this directory and still stay inside the tree.
	return stat(f.root, path.Join(r, e.Name()))
}

// Open opens a regular file for reading. The File is an *os.File.
func (f *FS) Open(ctx context.Context, name string) (storage.File, error) {
	return f.open(ctx, "open", name, os.O_RDONLY)
}

// Create opens a regular file for reading and writing, creating it if
// needed. With storage.Truncate an existing file is emptied; otherwise
// (storage.Keep, or no flag) its content is kept. The File is an *os.File.
func (f *FS) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	mode := os.O_RDWR | os.O_CREATE
	if flag&storage.Truncate != 0 {
		mode |= os.O_TRUNC
	}
	return f.open(ctx, "create", name, mode)
}

func (f *FS) open(ctx context.Context, op, name string, mode int) (*os.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := f.rel(op, name)
	if err != nil {
		return nil, err
	}
	if isRoot(r) {
		return nil, fmt.Errorf("%s %s: %w", op, name, storage.ErrIsDir)
	}
	return f.openIn(f.root, op, name, r, mode)
}

// openIn opens r, relative to root, for open; name is its driver name.
func (f *FS) openIn(root *os.Root, op, name, r string, mode int) (*os.File, error) {
	// O_NONBLOCK so that opening a FIFO does not wait for a peer; it is
	// cleared again once the file is known to be a regular file.
	file, err := root.OpenFile(r, mode|syscall.O_NONBLOCK, f.FileMode)
	if errors.Is(err, syscall.ENXIO) { // a FIFO without reader, a device without device
		return nil, fmt.Errorf("%s %s: not a regular file: %w", op, name, storage.ErrPermission)
	}
	if err != nil {
		return nil, f.wrap(op, name, err)
	}
	if err := f.regular(file, op, name); err != nil {
		return nil, err
	}
	return file, nil
}

// regular checks that file, opened O_NONBLOCK, is a regular file and
// clears O_NONBLOCK; otherwise it closes it.
func (f *FS) regular(file *os.File, op, name string) error {
	fi, err := file.Stat()
	switch {
	case err != nil:
		err = f.wrap(op, name, err)
	case fi.IsDir():
		err = fmt.Errorf("%s %s: %w", op, name, storage.ErrIsDir)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s %s: not a regular file: %w", op, name, storage.ErrPermission)
	default:
		if err = setBlocking(file); err != nil {
			err = f.wrap(op, name, err)
		}
	}
	if err != nil {
		file.Close()
	}
	return err
}

func setBlocking(file *os.File) error {
	rc, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// Mkdir creates one directory.
func (f *FS) Mkdir(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := f.rel("mkdir", name)
	if err != nil {
		return err
	}
	if isRoot(r) {
		return fmt.Errorf("mkdir %s: %w", name, storage.ErrExist)
	}
	return f.wrap("mkdir", name, f.root.Mkdir(r, f.DirMode))
}

// Remove deletes a file, a symlink or an empty directory. The root cannot be
// removed.
func (f *FS) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := f.rel("remove", name)
	if err != nil {
		return err
	}
	if isRoot(r) {
		return fmt.Errorf("remove %s: %w", name, storage.ErrPermission)
	}
	return f.wrap("remove", name, f.root.Remove(r))
}

// Rename moves oldname to newname, replacing a file or an empty directory
// at newname as rename(2) does. The root cannot be moved or replaced.
func (f *FS) Rename(ctx context.Context, oldname, newname string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ro, err := f.rel("rename", oldname)
	if err != nil {
		return err
	}
	rn, err := f.rel("rename", newname)
	if err != nil {
		return err
	}
	if isRoot(ro) || isRoot(rn) {
		return fmt.Errorf("rename %s %s: %w", oldname, newname, storage.ErrPermission)
	}
	return f.wrap("rename", oldname+" to "+newname, f.root.Rename(ro, rn))
}

// Chmod sets the permission bits of name; other mode bits are ignored.
func (f *FS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := f.rel("chmod", name)
	if err != nil {
		return err
	}
	return f.wrap("chmod", name, f.root.Chmod(r, mode.Perm()))
}

// Chtimes sets the modification time of name, leaving the access time.
func (f *FS) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := f.rel("chtimes", name)
	if err != nil {
		return err
	}
	return f.wrap("chtimes", name, f.root.Chtimes(r, time.Time{}, mtime))
}

// Truncate sets the size of a regular file.
func (f *FS) Truncate(ctx context.Context, name string, size int64) error {
	if size < 0 {
		return fmt.Errorf("truncate %s: negative size: %w", name, fs.ErrInvalid)
	}
	file, err := f.open(ctx, "truncate", name, os.O_WRONLY)
	if err != nil {
		return err
	}
	err = file.Truncate(size)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return f.wrap("truncate", name, err)
}

// OpenDir opens the directory name. A symlink that stays inside the root is
// followed; the Dir's entries are reached through the directory opened,
// wherever it is moved, and never outside it.
func (f *FS) OpenDir(ctx context.Context, name string) (storage.Dir, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := f.rel("opendir", name)
	if err != nil {
		return nil, err
	}
	if !isRoot(r) {
		r += "/." // a FIFO planted under name must fail, not block
	}
	root, err := f.root.OpenRoot(r)
	if err != nil {
		return nil, f.wrap("opendir", name, err)
	}
	self, err := root.Open(".")
	if err == nil {
		var rc syscall.RawConn
		if rc, err = self.SyscallConn(); err == nil {
			return &dir{fs: f, name: name, root: root, self: self, rc: rc}, nil
		}
		self.Close()
	}
	root.Close()
	return nil, f.wrap("opendir", name, err)
}

// dir is an open directory of an FS. The calls made for each file of a
// directory copied (Create, Open, Rename, Chtimes) go straight to the *at system
// calls on the directory's descriptor when the name is a plain entry: the
// same calls os.Root makes, without its path walk, and without the
// system calls os.Root.OpenFile makes to try and fail to poll a regular
// file. Anything else (a symlink, a directory in the way) takes the
// os.Root path.
type dir struct {
	fs   *FS
	name string // as opened
	root *os.Root
	self *os.File        // the directory itself, open
	rc   syscall.RawConn // self's descriptor, held while in use
}

// at calls fn with the directory's descriptor, which stays open meanwhile.
func (d *dir) at(fn func(fd int) error) error {
	var err error
	if cerr := d.rc.Control(func(fd uintptr) { err = fn(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}

// openat opens the entry name with flags (O_CLOEXEC and O_NOFOLLOW
// added) as an *os.File: os.NewFile does not try to poll it.
func (d *dir) openat(name string, flags int, perm fs.FileMode) (*os.File, error) {
	var file *os.File
	err := d.at(func(dirfd int) error {
		fd, err := ignoringEINTR(func() (int, error) {
			return unix.Openat(dirfd, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(perm.Perm()))
		})
		if err != nil {
			return err
		}
		file = os.NewFile(uintptr(fd), path.Join(d.name, name))
		return nil
	})
	return file, err
}

// ignoringEINTR calls fn again while it is interrupted by a signal.
func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// check checks the context and name, an entry's base name.
func (d *dir) check(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return storage.BaseName(op, name)
}

func (d *dir) wrap(op, name string, err error) error {
	return d.fs.wrap(op, path.Join(d.name, name), err)
}

// Stat describes the entry name as FS.Stat does.
func (d *dir) Stat(ctx context.Context, name string) (storage.Info, error) {
	if err := d.check(ctx, "stat", name); err != nil {
		return storage.Info{}, err
	}
	info, err := stat(d.root, name)
	return info, d.wrap("stat", name, err)
}

// Open opens a regular file for reading as FS.Open does.
func (d *dir) Open(ctx context.Context, name string) (storage.File, error) {
	if err := d.check(ctx, "open", name); err != nil {
		return nil, err
	}
	full := path.Join(d.name, name)
	file, err := d.openat(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	switch {
	case err == unix.ELOOP: // a symlink, which may stay inside the root
		return d.fs.openIn(d.root, "open", full, name, os.O_RDONLY)
	case err == unix.ENXIO: // a FIFO without reader, a device without device
		return nil, fmt.Errorf("open %s: not a regular file: %w", full, storage.ErrPermission)
	case err != nil:
		return nil, d.wrap("open", name, err)
	}
	if err := d.fs.regular(file, "open", full); err != nil {
		return nil, err
	}
	return file, nil
}

// OpenStat opens name for reading, without following a symlink, and
// describes it from the open file; anything but a regular file is
// described by Stat, and not opened.
func (d *dir) OpenStat(ctx context.Context, name string) (storage.File, storage.Info, error) {
	if err := d.check(ctx, "open", name); err != nil {
		return nil, storage.Info{}, err
	}
	file, err := d.openat(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil { // a symlink (ELOOP), a device without device, gone...
		in, serr := d.Stat(ctx, name)
		if serr == nil && in.Mode.IsRegular() && in.Target == "" {
			serr = d.wrap("open", name, err) // a file that would not open
		}
		return nil, in, serr
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, storage.Info{}, d.wrap("open", name, err)
	}
	in := info(fi, "")
	if !fi.Mode().IsRegular() {
		file.Close()
		return nil, in, nil
	}
	if err := setBlocking(file); err != nil {
		file.Close()
		return nil, storage.Info{}, d.wrap("open", name, err)
	}
	return file, in, nil
}

// Create makes a new regular file, which cannot be a FIFO, a device or a
// symlink planted under its name: O_EXCL fails on any entry. The File is an
// *os.File.
func (d *dir) Create(ctx context.Context, name string) (storage.File, error) {
	if err := d.check(ctx, "create", name); err != nil {
		return nil, err
	}
	file, err := d.openat(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, d.fs.FileMode)
	if err != nil {
		return nil, d.wrap("create", name, err)
	}
	return file, nil
}

// Remove deletes a file, a symlink or an empty directory.
func (d *dir) Remove(ctx context.Context, name string) error {
	if err := d.check(ctx, "remove", name); err != nil {
		return err
	}
	return d.wrap("remove", name, d.root.Remove(name))
}

// Rename moves oldname to newname as FS.Rename does.
func (d *dir) Rename(ctx context.Context, oldname, newname string) error {
	if err := d.check(ctx, "rename", oldname); err != nil {
		return err
	}
	if err := d.check(ctx, "rename", newname); err != nil {
		return err
	}
	err := d.at(func(fd int) error {
		// Onto nothing, in one call where the file system can; otherwise
		// a directory at newname takes the os.Root path, which refuses to
		// replace it as os.Rename does.
		err := unix.Renameat2(fd, oldname, fd, newname, unix.RENAME_NOREPLACE)
		if err != unix.EEXIST && err != unix.EINVAL && err != unix.ENOSYS {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, newname, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return d.root.Rename(oldname, newname)
		}
		return unix.Renameat(fd, oldname, fd, newname)
	})
	return d.fs.wrap("rename", path.Join(d.name, oldname)+" to "+path.Join(d.name, newname), err)
}

// Chmod sets the permission bits of name; other mode bits are ignored.
func (d *dir) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if err := d.check(ctx, "chmod", name); err != nil {
		return err
	}
	return d.wrap("chmod", name, d.root.Chmod(name, mode.Perm()))
}

// Chtimes sets the modification time of name, leaving the access time.
func (d *dir) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	if err := d.check(ctx, "chtimes", name); err != nil {
		return err
	}
	err := d.at(func(fd int) error {
		// As os.Root does it, without its path walk: a symlink is
		// followed (inside the root), anything else is set itself.
		var b [1]byte
		if _, err := unix.Readlinkat(fd, name, b[:]); err != unix.EINVAL || mtime.IsZero() {
			return d.root.Chtimes(name, time.Time{}, mtime)
		}
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
		return unix.UtimesNanoAt(fd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
	return d.wrap("chtimes", name, err)
}

// SetModTime sets the modification time of f, a file Create opened,
// leaving the access time, as futimens does.
func (d *dir) SetModTime(f storage.File, mtime time.Time) (bool, error) {
	of, ok := f.(*os.File)
	if !ok || mtime.IsZero() {
		return false, nil
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return false, nil
	}
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		// utimensat with no name is futimens: the file fd is.
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}); err != nil {
		return false, nil
	}
	if errno != 0 {
		return true, d.fs.wrap("chtimes", of.Name(), errno)
	}
	return true, nil
}

// Close releases the directory.
func (d *dir) Close() error {
	err := d.self.Close()
	if rerr := d.root.Close(); err == nil {
		err = rerr
	}
	return err
}
