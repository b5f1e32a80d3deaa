// Package storage defines the small driver interface through which ferry's
// endpoint server reaches the data it serves (GridFTP's DSI, rclone's fs.Fs).
//
// A Driver serves one tree. Every name handed to it is a slash-separated path
// that has been cleaned by Clean and is relative to the driver's root ("/" is
// the root itself). Drivers must still refuse anything that would leave the
// root — "..", absolute symlinks, symlinks pointing outside — and report it as
// ErrPermission.
//
// Optional capabilities are separate interfaces found by type assertion.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Errors every driver reports (wrapped) so that callers can map them to
// protocol replies with errors.Is.
var (
	ErrNotExist   = fs.ErrNotExist
	ErrExist      = fs.ErrExist
	ErrPermission = fs.ErrPermission
	ErrNotDir     = errors.New("not a directory")
	ErrIsDir      = errors.New("is a directory")
	ErrNotEmpty   = errors.New("directory not empty")
	ErrNoSpace    = errors.New("no space left on device")
)

// Info describes one entry of the tree.
type Info struct {
	Name    string      // base name
	Size    int64       // bytes; 0 for directories
	Mode    fs.FileMode // type bits and permission bits
	ModTime time.Time
	Target  string // symlink target as stored, for a symlink (also one Stat followed inside the root)
	// ID names the object on its host (device and inode for POSIX): two
	// names with one ID are one object. "" when the driver cannot tell.
	ID string
}

// IsDir reports whether the entry is a directory.
func (i Info) IsDir() bool { return i.Mode.IsDir() }

// File is an open file. Reads and writes address absolute offsets, so several
// data streams can use one File at once.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
}

// OpenFlag says how Create opens a file for writing.
type OpenFlag int

const (
	// Truncate empties an existing file (a plain STOR).
	Truncate OpenFlag = 1 << iota
	// Keep keeps existing content (APPE, restarts, ESTO).
	Keep
)

// Driver is one storage tree.
type Driver interface {
	// Stat describes name without following a final symlink outside the root.
	Stat(ctx context.Context, name string) (Info, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(ctx context.Context, name string) ([]Info, error)
	// Open opens a regular file for reading.
	Open(ctx context.Context, name string) (File, error)
	// Create opens a regular file for writing, creating it if needed.
	Create(ctx context.Context, name string, flag OpenFlag) (File, error)
	// Mkdir creates one directory; ErrExist if it exists.
	Mkdir(ctx context.Context, name string) error
	// Remove deletes a file or an empty directory.
	Remove(ctx context.Context, name string) error
	// Rename moves oldname to newname, replacing a file at newname.
	Rename(ctx context.Context, oldname, newname string) error
	// Chmod sets permission bits.
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
	// Chtimes sets the modification time.
	Chtimes(ctx context.Context, name string, mtime time.Time) error
	// Truncate sets the size of a file.
	Truncate(ctx context.Context, name string, size int64) error
}

// DirLister is a Driver that lists a directory as a stream: a directory
// of millions of entries costs the memory of a few of them.
type DirLister interface {
	// ListDir calls fn with each entry of the directory name, described
	// as ReadDir describes them but in no set order, as it reads them. An
	// error from fn stops the listing and is returned.
	ListDir(ctx context.Context, name string, fn func(Info) error) error
}

// ListDir lists the directory name of d as a stream: with d's ListDir if
// d is a DirLister, otherwise from its ReadDir.
func ListDir(ctx context.Context, d Driver, name string, fn func(Info) error) error {
	if l, ok := d.(DirLister); ok {
		return l.ListDir(ctx, name, fn)
	}
	infos, err := d.ReadDir(ctx, name)
	if err != nil {
		return err
	}
	for _, i := range infos {
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

// Checksummer is a Driver that knows the checksum of a whole file without
// reading it: a sink that hashed the data as it was written and kept
// nothing else, an object store that keeps digests in its metadata.
type Checksummer interface {
	// Checksum returns the digest of the whole file name with the
	// algorithm alg (a GridFTP name such as "MD5" or "XXH128", in any
	// case), in the form CKSM replies with (lowercase hex, as the package
	// checksum writes it). An error wrapping errors.ErrUnsupported means
	// the driver cannot tell for this file or algorithm: the caller then
	// reads the file.
	Checksum(ctx context.Context, name, alg string) (string, error)
}

// DirOpener is a Driver that can open a directory, to work on the entries
// in it without resolving the directory's path for each of them.
type DirOpener interface {
	// OpenDir opens the directory name, following a symlink only as Stat
	// does; ErrNotDir if name is not a directory.
	OpenDir(ctx context.Context, name string) (Dir, error)
}

// Dir is an open directory of a tree. The names handed to its methods are
// base names of entries in it ("f", never "a/f", "." nor ".."); anything
// else is refused with ErrPermission. A Dir is safe for concurrent use
// until it is closed.
type Dir interface {
	// Stat describes the entry name as Driver.Stat does.
	Stat(ctx context.Context, name string) (Info, error)
	// Open opens a regular file for reading.
	Open(ctx context.Context, name string) (File, error)
	// Create makes a new regular file and opens it for reading and
	// writing; ErrExist if name exists, whatever it is.
	Create(ctx context.Context, name string) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(ctx context.Context, name string) error
	// Rename moves oldname to newname, replacing a file at newname.
	Rename(ctx context.Context, oldname, newname string) error
	// Chmod sets permission bits.
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
	// Chtimes sets the modification time.
	Chtimes(ctx context.Context, name string, mtime time.Time) error
	// Close releases the directory.
	Close() error
}

// FileTimer is an optional capability of a Dir: SetModTime sets the
// modification time of f, a file its Create opened, through f itself (one
// system call where Chtimes looks the name up again); false, and nothing
// done, when it cannot.
type FileTimer interface {
	SetModTime(f File, mtime time.Time) (bool, error)
}

// StatOpener is an optional capability of a Dir: OpenStat opens the
// entry name for reading, without following a symlink, and describes it
// as Stat does, from the open file when it is a regular file (one lookup
// of the name where Stat then Open make two). The File is nil, and the
// Info describes the entry, when it is not a regular file.
type StatOpener interface {
	OpenStat(ctx context.Context, name string) (File, Info, error)
}

// OpenDir opens the directory name of d: with d's OpenDir if d is a
// DirOpener, otherwise as a Dir that passes each call on to d with the
// entry's whole name (its Create checks that the file does not exist
// before creating it, which another client may race).
func OpenDir(ctx context.Context, d Driver, name string) (Dir, error) {
	if o, ok := d.(DirOpener); ok {
		return o.OpenDir(ctx, name)
	}
	info, err := d.Stat(ctx, name)
	if err == nil && !info.IsDir() {
		err = fmt.Errorf("opendir %s: %w", name, ErrNotDir)
	}
	if err != nil {
		return nil, err
	}
	return &pathDir{d: d, name: name}, nil
}

// BaseName checks that name is the base name of an entry, as a Dir takes
// it.
func BaseName(op, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q: not the name of an entry: %w", op, name, ErrPermission)
	}
	return nil
}

// pathDir is the Dir of a driver that is not a DirOpener.
type pathDir struct {
	d    Driver
	name string
}

// join checks name and returns the whole name of the entry.
func (p *pathDir) join(op, name string) (string, error) {
	if err := BaseName(op, name); err != nil {
		return "", err
	}
	return path.Join(p.name, name), nil
}

func (p *pathDir) Stat(ctx context.Context, name string) (Info, error) {
	n, err := p.join("stat", name)
	if err != nil {
		return Info{}, err
	}
	return p.d.Stat(ctx, n)
}

func (p *pathDir) Open(ctx context.Context, name string) (File, error) {
	n, err := p.join("open", name)
	if err != nil {
		return nil, err
	}
	return p.d.Open(ctx, n)
}

func (p *pathDir) Create(ctx context.Context, name string) (File, error) {
	n, err := p.join("create", name)
	if err != nil {
		return nil, err
	}
	switch _, err := p.d.Stat(ctx, n); {
	case err == nil:
		return nil, fmt.Errorf("create %s: %w", n, ErrExist)
	case !errors.Is(err, ErrNotExist):
		return nil, err
	}
	return p.d.Create(ctx, n, Truncate)
}

func (p *pathDir) Remove(ctx context.Context, name string) error {
	n, err := p.join("remove", name)
	if err != nil {
		return err
	}
	return p.d.Remove(ctx, n)
}

func (p *pathDir) Rename(ctx context.Context, oldname, newname string) error {
	o, err := p.join("rename", oldname)
	if err != nil {
		return err
	}
	n, err := p.join("rename", newname)
	if err != nil {
		return err
	}
	return p.d.Rename(ctx, o, n)
}

func (p *pathDir) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	n, err := p.join("chmod", name)
	if err != nil {
		return err
	}
	return p.d.Chmod(ctx, n, mode)
}

func (p *pathDir) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	n, err := p.join("chtimes", name)
	if err != nil {
		return err
	}
	return p.d.Chtimes(ctx, n, mtime)
}

func (p *pathDir) Close() error { return nil }

// Clean turns a client path into the form drivers take: absolute, slash
// separated, no "." or ".." elements, never above "/". cwd is the directory
// relative paths start from.
func Clean(cwd, p string) string {
	if !path.IsAbs(p) {
		p = path.Join("/", cwd, p)
	}
	return path.Clean("/" + p)
}
