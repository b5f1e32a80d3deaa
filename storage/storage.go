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
	"io"
	"io/fs"
	"path"
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

// Clean turns a client path into the form drivers take: absolute, slash
// separated, no "." or ".." elements, never above "/". cwd is the directory
// relative paths start from.
func Clean(cwd, p string) string {
	if !path.IsAbs(p) {
		p = path.Join("/", cwd, p)
	}
	return path.Clean("/" + p)
}
