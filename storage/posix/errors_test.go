package posix

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"ferry/storage"
)

func TestWrap(t *testing.T) {
	f := &FS{escape: errors.New("path escapes from parent")}
	tests := []struct {
		err  error
		want error
	}{
		{syscall.ENOENT, storage.ErrNotExist},
		{syscall.EEXIST, storage.ErrExist},
		{syscall.EACCES, storage.ErrPermission},
		{syscall.EPERM, storage.ErrPermission},
		{syscall.EROFS, storage.ErrPermission},
		{syscall.ENOTEMPTY, storage.ErrNotEmpty},
		{syscall.ENOTDIR, storage.ErrNotDir},
		{syscall.EISDIR, storage.ErrIsDir},
		{syscall.ENOSPC, storage.ErrNoSpace},
		{syscall.EDQUOT, storage.ErrNoSpace},
		{f.escape, storage.ErrPermission},
		{syscall.ELOOP, syscall.ELOOP},
	}
	for _, tt := range tests {
		for _, err := range []error{
			tt.err,
			&fs.PathError{Op: "openat", Path: "/disk/x", Err: tt.err},
			&os.LinkError{Op: "renameat", Old: "/disk/x", New: "/disk/y", Err: tt.err},
		} {
			got := f.wrap("op", "/x", err)
			if !errors.Is(got, tt.want) {
				t.Errorf("wrap(%v) = %v, want %v", err, got, tt.want)
			}
			if got.Error() != "op /x: "+tt.want.Error() {
				t.Errorf("wrap(%v) = %q", err, got.Error())
			}
		}
	}
	// ENOTEMPTY is also fs.ErrExist to syscall; the wrapped error is only
	// ErrNotEmpty, so a reply table checking ErrExist first is not fooled.
	if errors.Is(f.wrap("rmdir", "/x", syscall.ENOTEMPTY), storage.ErrExist) {
		t.Errorf("ENOTEMPTY wrapped as ErrExist")
	}
	if f.wrap("op", "/x", nil) != nil {
		t.Errorf("wrap(nil) != nil")
	}
}

func TestEscapeError(t *testing.T) {
	f, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.root.Stat("../x")
	if !errors.Is(err, f.escape) {
		t.Errorf("escape error not recognised: %v (learned %v)", err, f.escape)
	}
}
