package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// file is one file to copy and its progress.
type file struct {
	src, dst string
	size     int64
	mtime    time.Time

	// guarded by copier.mu
	units    int            // units not yet done
	have     gridftp.Ranges // restart ranges of an unchunked transfer
	attempts int
	failed   bool
	sum      string
}

// planner lists sources and destinations and decides what to move.
type planner struct {
	src, dst *client.Conn
	opts     Options
	alg      string
	files    []*file
	skipped  []FileResult
	failed   []FileResult // directories that could not be listed
	dirs     int          // directories walked
}

// isNotFound reports a reply saying the path does not exist.
func isNotFound(err error) bool {
	var ge *gridftp.Error
	return errors.As(err, &ge) && ge.Reply.Code == gridftp.CodeFileUnavailable &&
		!strings.Contains(ge.Reply.Text(), "PERMISSION_DENIED")
}

// plan expands items into files. Each item's destination is looked up
// once, with its source: it is a directory to create or to copy into, or
// the file that the sync level compares with.
func (p *planner) plan(ctx context.Context, items []Item) error {
	for _, it := range items {
		e, de, err, derr := stat(ctx, p.src, p.dst, it.Src, it.Dst)
		if err != nil {
			return fmt.Errorf("source %s: %w", it.Src, err)
		}
		isDir := derr == nil && de.IsDir()
		if e.IsDir() {
			if !p.opts.Recursive && !it.Recursive {
				return fmt.Errorf("source %s is a directory: copy it with recursive", it.Src)
			}
			if !isDir {
				if err := p.mkdirAll(ctx, it.Dst); err != nil {
					return err
				}
			}
			if err := p.walk(ctx, it.Src, it.Dst); err != nil {
				return err
			}
			continue
		}
		dst := it.Dst
		var have *gridftp.Entry
		switch {
		case isDir || strings.HasSuffix(dst, "/"):
			dst = path.Join(dst, path.Base(it.Src))
			if p.opts.SyncLevel != SyncNone {
				if de, err := p.dst.Stat(ctx, dst); err == nil {
					have = &de
				}
			}
		case derr == nil:
			have = &de
		}
		if !isDir {
			if err := p.mkdirAll(ctx, path.Dir(dst)); err != nil {
				return err
			}
		}
		if err := p.decide(ctx, it.Src, dst, e, have); err != nil {
			return err
		}
	}
	return nil
}

// walk lists a source directory and its subdirectories, creating each at
// the destination.
func (p *planner) walk(ctx context.Context, src, dst string) error {
	p.dirs++
	entries, err := p.src.List(ctx, src)
	var refused *gridftp.Error
	if errors.As(err, &refused) {
		// The server refused this directory: it fails alone, the rest goes on.
		p.failed = append(p.failed, FileResult{Src: src, Dst: dst, Outcome: Failed, Attempts: 1,
			Err: fmt.Errorf("list source directory: %w", err)})
		return nil
	}
	if err != nil {
		return fmt.Errorf("list source %s: %w", src, err)
	}
	existing := map[string]gridftp.Entry{}
	if p.opts.SyncLevel != SyncNone || p.opts.DeleteExtra {
		des, err := p.dst.List(ctx, dst)
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("list destination %s: %w", dst, err)
		}
		for _, de := range des {
			existing[de.Name] = de
		}
	}
	if entries, err = p.prune(ctx, src, dst, entries, existing); err != nil {
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.Contains(e.Name, "/") || e.Name == "." || e.Name == ".." {
			continue // no server lists such names; a hostile one is ignored
		}
		s, d := path.Join(src, e.Name), path.Join(dst, e.Name)
		switch {
		case e.IsDir():
			if _, ok := existing[e.Name]; !ok {
				if err := p.mkdir(ctx, d); err != nil {
					return err
				}
			}
			if err := p.walk(ctx, s, d); err != nil {
				return err
			}
		case e.Type == "file":
			var have *gridftp.Entry
			if de, ok := existing[e.Name]; ok {
				have = &de
			}
			if err := p.decide(ctx, s, d, e, have); err != nil {
				return err
			}
		}
	}
	return nil
}

// decide skips or schedules one file by sync level.
func (p *planner) decide(ctx context.Context, src, dst string, e gridftp.Entry, have *gridftp.Entry) error {
	skip := false
	if have != nil && !have.IsDir() {
		switch p.opts.SyncLevel {
		case SyncExists:
			skip = true
		case SyncSize:
			skip = have.Size == e.Size
		case SyncMtime:
			skip = !e.Modify.After(have.Modify)
		case SyncChecksum:
			if have.Size == e.Size {
				a, b, err := checksums(ctx, p.src, p.dst, p.alg, src, dst, 0, -1)
				if err != nil {
					return err
				}
				skip = a == b
			}
		}
	}
	if skip {
		p.skipped = append(p.skipped, FileResult{Src: src, Dst: dst, Size: e.Size, Outcome: Skipped})
		return nil
	}
	p.files = append(p.files, &file{src: src, dst: dst, size: e.Size, mtime: e.Modify})
	return nil
}

func (p *planner) mkdir(ctx context.Context, d string) error {
	_, err := p.dst.Do(ctx, "MKD %s", d)
	var ge *gridftp.Error
	if err != nil && errors.As(err, &ge) {
		if e, serr := p.dst.Stat(ctx, d); serr == nil && e.IsDir() {
			return nil // it exists
		}
	}
	if err != nil {
		return fmt.Errorf("create directory %s: %w", d, err)
	}
	return nil
}

// mkdirAll creates d and its parents at the destination.
func (p *planner) mkdirAll(ctx context.Context, d string) error {
	if d == "/" || d == "." || d == "" {
		return nil
	}
	if e, err := p.dst.Stat(ctx, d); err == nil && e.IsDir() {
		return nil
	}
	if err := p.mkdirAll(ctx, path.Dir(d)); err != nil {
		return err
	}
	return p.mkdir(ctx, d)
}

// stat looks up sp at the source and, at the same time, dp at the
// destination; dp "" is not looked up.
func stat(ctx context.Context, src, dst *client.Conn, sp, dp string) (se, de gridftp.Entry, serr, derr error) {
	if dp == "" {
		se, serr = src.Stat(ctx, sp)
		return se, de, serr, derr
	}
	both(func() { se, serr = src.Stat(ctx, sp) }, func() { de, derr = dst.Stat(ctx, dp) })
	return se, de, serr, derr
}

// checksums computes alg over a range at both ends at once.
func checksums(ctx context.Context, src, dst *client.Conn, alg, sp, dp string, off, n int64) (string, string, error) {
	var a, b string
	var aerr, berr error
	both(func() { a, aerr = src.Checksum(ctx, alg, sp, off, n) }, func() { b, berr = dst.Checksum(ctx, alg, dp, off, n) })
	if aerr != nil {
		return "", "", fmt.Errorf("source checksum: %w", aerr)
	}
	if berr != nil {
		return "", "", fmt.Errorf("destination checksum: %w", berr)
	}
	return a, b, nil
}

// preferred is the order in which checksum algorithms are chosen: fast
// ones first, then those every GridFTP server has.
var preferred = []string{"XXH128", "CRC32C", "MD5", "ADLER32", "SHA1", "SHA256", "SHA512"}

// chooseAlgorithm picks what both ends compute.
func chooseAlgorithm(want string, a, b []string) (string, error) {
	has := func(list []string, n string) bool {
		for _, x := range list {
			if strings.EqualFold(x, n) {
				return true
			}
		}
		return false
	}
	if want != "" {
		want = strings.ToUpper(want)
		if !has(a, want) || !has(b, want) {
			return "", fmt.Errorf("checksum algorithm %s is not offered by both endpoints", want)
		}
		return want, nil
	}
	for _, n := range preferred {
		if has(a, n) && has(b, n) {
			return n, nil
		}
	}
	if len(a) == 0 && len(b) == 0 {
		return "MD5", nil // servers that hide FEAT CKSM usually still compute MD5
	}
	return "", errors.New("the endpoints share no checksum algorithm")
}
