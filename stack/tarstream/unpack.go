package tarstream

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"syscall"

	"ferry/internal/partname"
	"ferry/stack"
	"ferry/storage"
)

// Create unpacks a tar stream below the directory t.Name, which it makes
// if needed: the Sink is an io.Writer.
func (l *tarLayer) Create(ctx context.Context, t *stack.Transfer) (stack.Sink, error) {
	if l.env.ReadOnly {
		return nil, fmt.Errorf("%s into %s: %w", TarLayer, t.Name, storage.ErrPermission)
	}
	if err := mkdirAll(ctx, l.env.FS, t.Name); err != nil {
		return nil, err
	}
	u := &unpacker{
		ctx:     ctx,
		fs:      l.env.FS,
		root:    t.Name,
		replace: t.Flag&storage.Truncate != 0,
		maxFile: l.env.MaxFile,
		alg:     l.alg,
		report:  reporter(t),
		dirs:    map[string]bool{},
		done:    make(chan struct{}),
	}
	u.pr, u.pw = io.Pipe()
	go u.run()
	return u, nil
}

// mkdirAll makes the directory name and those above it.
func mkdirAll(ctx context.Context, fsys storage.Driver, name string) error {
	info, err := fsys.Stat(ctx, name)
	switch {
	case err == nil && info.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s %s: %w", TarLayer, name, storage.ErrNotDir)
	case !errors.Is(err, storage.ErrNotExist):
		return err
	}
	if err := mkdirAll(ctx, fsys, path.Dir(name)); err != nil {
		return err
	}
	if err := fsys.Mkdir(ctx, name); err != nil && !errors.Is(err, storage.ErrExist) {
		return err
	}
	return nil
}

// unpacker unpacks the stream written to it in a goroutine of its own
// (archive/tar reads; the transfer writes), which it reaches through a
// pipe.
type unpacker struct {
	ctx     context.Context
	fs      storage.Driver
	root    string
	replace bool // replace existing files
	maxFile int64
	alg     string
	report  func(stack.Result)
	dirs    map[string]bool // directories below root made or found real, relative
	dir     storage.Dir     // the directory of the member before, open; nil for none
	dirRel  string          // its name, relative

	pw   *io.PipeWriter
	pr   *io.PipeReader
	done chan struct{}
	err  error // why the stream failed; set before done closes
}

// Write passes a piece of the stream on; it fails once the stream did.
func (u *unpacker) Write(b []byte) (int, error) { return u.pw.Write(b) }

// Close ends the stream and waits until it is unpacked: its error says
// whether the stream was a whole archive.
func (u *unpacker) Close() error {
	u.pw.Close()
	<-u.done
	return u.err
}

// Abort stops the unpacking and waits until the file being written, if
// any, is removed.
func (u *unpacker) Abort(cause error) {
	if cause == nil {
		cause = errors.New("aborted")
	}
	u.pw.CloseWithError(cause)
	u.pr.CloseWithError(cause)
	<-u.done
}

func (u *unpacker) run() {
	defer close(u.done)
	if err := u.unpack(); err != nil {
		u.err = err
		u.pr.CloseWithError(err)
		return
	}
	// Blocks of zeros that pad the archive to a record (GNU tar), or
	// anything else past its end, are not looked at.
	if _, err := io.Copy(io.Discard, u.pr); err != nil {
		u.err = err
	}
}

// endMarker is the length of the end of an archive: two zero blocks.
const endMarker = 2 * 512

func (u *unpacker) unpack() error {
	defer u.closeDir()
	// A reader buffer as large as the writes of a transfer takes each in
	// one piece: fewer switches between the goroutines on either side of
	// the pipe.
	tail := &tailReader{r: bufio.NewReaderSize(u.pr, bufSize)}
	tr := tar.NewReader(tail)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	for {
		hdr, err := tr.Next()
		switch {
		case err == io.EOF && tail.zeros < endMarker:
			return streamError("the stream ends without the end-of-archive marker: truncated", io.ErrUnexpectedEOF)
		case err == io.EOF:
			return nil
		case err == io.ErrUnexpectedEOF:
			return streamError("the stream ends inside a member header: truncated", err)
		case errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrInsecurePath):
			return streamError("not a tar stream, or a corrupt one: "+err.Error(), err)
		case err != nil:
			return err // the pipe's: the transfer was aborted
		}
		res, err := u.member(hdr, tr, *bp)
		if err != nil {
			return err
		}
		if res != nil {
			u.report(*res)
		}
	}
}

func streamError(text string, err error) error {
	return &stack.ShownError{Text: "tar: " + text, Err: err}
}

// member unpacks one member, or refuses it. A nil Result is for a member
// not reported (the directory itself); an error fails the stream.
func (u *unpacker) member(hdr *tar.Header, tr io.Reader, buf []byte) (*stack.Result, error) {
	rel, err := memberName(hdr.Name)
	if err != nil {
		return &stack.Result{Name: hdr.Name, Err: err}, nil
	}
	fail := func(err error) (*stack.Result, error) { return &stack.Result{Name: rel, Err: err}, nil }
	switch hdr.Typeflag {
	case tar.TypeDir:
		if rel == "." {
			return nil, nil
		}
		if err := u.mkdirs(rel); err != nil {
			return fail(err)
		}
		return &stack.Result{Name: rel}, nil
	case tar.TypeReg:
		if rel == "." {
			return fail(refused("a file named as the directory itself"))
		}
		return u.file(hdr, rel, tr, buf)
	case tar.TypeSymlink:
		return fail(refused("a symbolic link (to " + strconv.Quote(hdr.Linkname) + ")"))
	case tar.TypeLink:
		return fail(refused("a hard link (to " + strconv.Quote(hdr.Linkname) + ")"))
	case tar.TypeChar, tar.TypeBlock:
		return fail(refused("a device"))
	case tar.TypeFifo:
		return fail(refused("a FIFO"))
	}
	return fail(refused(fmt.Sprintf("a member of type %q", hdr.Typeflag)))
}

// file unpacks a regular file through a temporary name in its directory.
func (u *unpacker) file(hdr *tar.Header, rel string, tr io.Reader, buf []byte) (*stack.Result, error) {
	fail := func(err error) (*stack.Result, error) { return &stack.Result{Name: rel, Err: err}, nil }
	if u.maxFile > 0 && hdr.Size > u.maxFile {
		return fail(&stack.ShownError{Text: fmt.Sprintf("refused: %d bytes, more than the server's maximum file size (%d)", hdr.Size, u.maxFile), Err: syscall.EFBIG})
	}
	dir, base := path.Split(rel)
	d, err := u.openDir(path.Clean(dir))
	if err != nil {
		return fail(err)
	}
	if !u.replace {
		if _, err := d.Stat(u.ctx, base); err == nil {
			return fail(fmt.Errorf("%s: %w", path.Join(u.root, rel), storage.ErrExist))
		} else if !errors.Is(err, storage.ErrNotExist) {
			return fail(err)
		}
	}
	tmp := partname.For(base)
	f, err := d.Create(u.ctx, tmp)
	if errors.Is(err, storage.ErrExist) && d.Remove(u.ctx, tmp) == nil {
		f, err = d.Create(u.ctx, tmp) // a killed stream's leftover
	}
	if err != nil {
		return fail(err)
	}
	n, sum, werr, rerr := u.copy(f, tr, buf)
	timed := false
	if ft, ok := d.(storage.FileTimer); ok && werr == nil && rerr == nil {
		timed, werr = ft.SetModTime(f, hdr.ModTime)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && !timed {
		werr = d.Chtimes(u.ctx, tmp, hdr.ModTime)
	}
	if werr == nil && hdr.Mode&0o111 != 0 {
		werr = d.Chmod(u.ctx, tmp, 0o755)
	}
	if werr == nil && rerr == nil {
		werr = d.Rename(u.ctx, tmp, base)
	}
	if werr != nil || rerr != nil {
		d.Remove(context.WithoutCancel(u.ctx), tmp)
	}
	if rerr != nil {
		return nil, rerr
	}
	if werr != nil {
		return fail(werr)
	}
	return &stack.Result{Name: rel, Size: n, Sum: sum}, nil
}

// openDir returns the directory rel below root, made if needed, and opened
// unless it is the one the member before was in: members come directory by
// directory. It is closed when the next member is in another one, or when
// the stream ends.
func (u *unpacker) openDir(rel string) (storage.Dir, error) {
	if u.dir != nil && u.dirRel == rel {
		return u.dir, nil
	}
	u.closeDir()
	if rel != "." {
		if err := u.mkdirs(rel); err != nil {
			return nil, err
		}
	}
	d, err := storage.OpenDir(u.ctx, u.fs, path.Join(u.root, rel))
	if err != nil {
		return nil, err
	}
	u.dir, u.dirRel = d, rel
	return d, nil
}

// closeDir closes the directory openDir holds open, if any.
func (u *unpacker) closeDir() {
	if u.dir != nil {
		u.dir.Close()
		u.dir = nil
	}
}

// copy writes a member's data to f, a buffer full at a time. A write error
// (werr) fails the member, a read error (rerr) the stream.
func (u *unpacker) copy(f storage.File, tr io.Reader, buf []byte) (n int64, sum string, werr, rerr error) {
	h := newHash(u.alg)
	for {
		k, err := readUpTo(tr, buf)
		if k > 0 {
			if _, werr = f.WriteAt(buf[:k], n); werr != nil {
				return n, "", werr, nil
			}
			if h != nil {
				h.Write(buf[:k])
			}
			n += int64(k)
		}
		switch {
		case err == io.EOF:
			if h != nil {
				sum = hexSum(h)
			}
			return n, sum, nil, nil
		case err == io.ErrUnexpectedEOF:
			return n, "", nil, streamError("the stream ends inside a member: truncated", err)
		case err != nil:
			return n, "", nil, err
		}
	}
}

// readUpTo reads from r until buf is full or r fails: bufio hands on what it
// holds, often the start of a member only.
func readUpTo(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// mkdirs makes the directory rel below root and those above it, and
// refuses to go through one that is a symbolic link.
func (u *unpacker) mkdirs(rel string) error {
	if u.dirs[rel] {
		return nil
	}
	if parent := path.Dir(rel); parent != "." {
		if err := u.mkdirs(parent); err != nil {
			return err
		}
	}
	name := path.Join(u.root, rel)
	info, err := u.fs.Stat(u.ctx, name)
	if errors.Is(err, storage.ErrNotExist) {
		if err = u.fs.Mkdir(u.ctx, name); err == nil {
			u.dirs[rel] = true
			return nil
		}
		if errors.Is(err, storage.ErrExist) {
			info, err = u.fs.Stat(u.ctx, name)
		}
	}
	switch {
	case err != nil:
		return err
	case isLink(info):
		return refused(rel + " is a symbolic link")
	case !info.IsDir():
		return fmt.Errorf("%s: %w", name, storage.ErrNotDir)
	}
	u.dirs[rel] = true
	return nil
}

// tailReader counts the zero bytes at the end of what was read, up to
// endMarker: archive/tar takes an archive that just stops for a whole one.
type tailReader struct {
	r     io.Reader
	zeros int
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	b := p[:n]
	k := 0
	for k < len(b) && k < endMarker && b[len(b)-1-k] == 0 {
		k++
	}
	if k == len(b) {
		t.zeros = min(t.zeros+k, endMarker)
	} else {
		t.zeros = k
	}
	return n, err
}
