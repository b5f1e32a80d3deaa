package stack

import (
	"context"
	"fmt"

	"ferry/storage"
)

// The file layer: the session's storage driver, one file per transfer.

type file struct{ fs storage.Driver }

func newFile(e Entry, env Env) (Terminal, error) {
	if len(e.Opts) > 0 {
		return nil, Refuse(fmt.Sprintf("%s takes no options.", e.Name))
	}
	return file{env.FS}, nil
}

// Create opens the file for writing: the Sink is the storage.File itself.
func (f file) Create(ctx context.Context, t *Transfer) (Sink, error) {
	return f.fs.Create(ctx, t.Name, t.Flag)
}

// Open opens a regular file for reading.
func (f file) Open(ctx context.Context, t *Transfer) (Source, error) {
	info, err := f.fs.Stat(ctx, t.Name)
	if err == nil && info.IsDir() {
		err = fmt.Errorf("retr %s: %w", t.Name, storage.ErrIsDir)
	}
	if err != nil {
		return nil, err
	}
	fl, err := f.fs.Open(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	return &FileSource{File: fl, size: info.Size}, nil
}

// FileSource is a file open for a transfer to read: ranged reads and a
// size, as of when it was opened.
type FileSource struct {
	storage.File
	size int64
}

// Size is the file's size when it was opened.
func (s *FileSource) Size() int64 { return s.size }
