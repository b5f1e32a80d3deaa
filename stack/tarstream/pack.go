package tarstream

import (
	"archive/tar"
	"context"
	"fmt"
	"hash"
	"io"
	"path"
	"time"

	"ferry/stack"
	"ferry/storage"
)

// The tar layer: Open packs, Create unpacks (unpack.go).

type tarLayer struct {
	env stack.Env
	alg string // checksum of each member; "" for none
}

func newTar(e stack.Entry, env stack.Env) (stack.Terminal, error) {
	alg, err := options(e, "cksm", "")
	if err != nil {
		return nil, err
	}
	return &tarLayer{env: env, alg: alg}, nil
}

// Open packs the members of the directory t.Name into a tar stream: the
// Source is an io.Reader.
func (l *tarLayer) Open(ctx context.Context, t *stack.Transfer) (stack.Source, error) {
	if err := checkDir(ctx, l.env.FS, TarLayer, t.Name); err != nil {
		return nil, err
	}
	p := &packer{fs: l.env.FS, root: t.Name, report: reporter(t), h: newHash(l.alg)}
	p.tw = tar.NewWriter(&p.out)
	p.pipe = startPipeline(ctx, l.env.FS, t.Name, t.Members, true, p.prepare)
	return p, nil
}

// reporter returns t.Report, or a function that drops results.
func reporter(t *stack.Transfer) func(stack.Result) {
	if t.Report != nil {
		return t.Report
	}
	return func(stack.Result) {}
}

// packer is a tar stream of a transfer's members, made as it is read: each
// Read writes the stream through tw into the caller's buffer.
type packer struct {
	fs     storage.Driver
	root   string
	report func(stack.Result)
	pipe   *pipeline
	tw     *tar.Writer
	out    outBuf
	err    error // ends every Read once out is drained; io.EOF at the end

	// The member whose data is being written.
	cur   *item
	off   int64     // bytes of cur written to the stream
	fault error     // cur shrank or failed: the rest of it is zeros
	good  int64     // bytes of cur read before its fault; -1 for none
	h     hash.Hash // nil without cksm
}

// prepare, in a pipeline worker, opens a member and reads its start.
func (p *packer) prepare(ctx context.Context, it *item) {
	name := path.Join(p.root, it.rel)
	f, err := openMember(ctx, p.fs, p.root, it)
	if err != nil {
		it.err = err
		return
	}
	it.buf = bufPool.Get().(*[]byte)
	n, err := f.ReadAt(*it.buf, 0)
	it.n = n
	switch {
	case err == io.EOF:
		// All of it, whatever its size was when it was listed.
		it.whole, it.size = true, int64(n)
		f.Close()
	case err != nil:
		it.err = fmt.Errorf("read %s: %w", name, err)
		f.Close()
	case int64(n) > it.info.Size:
		it.err = fmt.Errorf("%s grew past %d bytes since it was listed: %w", name, it.info.Size, ErrChanged)
		f.Close()
	default:
		it.f, it.size = f, it.info.Size
	}
}

// Read writes the stream on into b.
func (p *packer) Read(b []byte) (int, error) {
	o := &p.out
	o.p, o.n = b, 0
	for o.n < len(b) {
		if o.off < len(o.spill) {
			c := copy(b[o.n:], o.spill[o.off:])
			o.n += c
			o.off += c
			continue
		}
		o.spill, o.off = o.spill[:0], 0
		if p.err != nil {
			break
		}
		p.err = p.step()
	}
	n := o.n
	o.p, o.n = nil, 0
	if n > 0 {
		return n, nil
	}
	return 0, p.err
}

// step writes the next piece of the stream: a header, a block of data, or
// the end of the archive.
func (p *packer) step() error {
	it := p.cur
	if it == nil {
		return p.begin()
	}
	o := &p.out
	room := int64(len(o.p) - o.n)
	switch {
	case p.off < int64(it.n): // the prepared start
		return p.write((*it.buf)[p.off:min(int64(it.n), p.off+room)])
	case p.off < it.size && p.fault != nil:
		dst := o.p[o.n : o.n+int(min(room, it.size-p.off))]
		clear(dst)
		_, err := p.tw.Write(dst)
		p.off += int64(len(dst))
		return err
	case p.off < it.size: // read in place, into the caller's buffer
		dst := o.p[o.n : o.n+int(min(room, it.size-p.off))]
		n, err := it.f.ReadAt(dst, p.off)
		if werr := p.write(dst[:n]); werr != nil {
			return werr
		}
		if n < len(dst) {
			if err == io.EOF {
				p.fault = fmt.Errorf("%s shrank to %d bytes while read (%d listed); padded with zeros: %w", path.Join(p.root, it.rel), p.off, it.size, ErrChanged)
			} else {
				p.fault = fmt.Errorf("read %s at %d: %w; padded with zeros", path.Join(p.root, it.rel), p.off, err)
			}
			p.good = p.off
		}
		return nil
	}
	p.end(it)
	return nil
}

// begin starts the next member, or ends the archive after the last.
func (p *packer) begin() error {
	it, err := p.pipe.next()
	switch {
	case err != nil:
		return err
	case it == nil:
		if err := p.tw.Close(); err != nil {
			return err
		}
		return io.EOF
	case it.err != nil:
		p.report(stack.Result{Name: it.name, Err: it.err})
		return nil
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     it.rel,
		Size:     it.size,
		Mode:     0o644,
		ModTime:  it.info.ModTime.Truncate(time.Second), // as tar does; archive/tar would round
	}
	if it.info.Mode&0o111 != 0 {
		hdr.Mode = 0o755
	}
	if it.info.IsDir() {
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, it.rel+"/", 0o755
	}
	if err := p.tw.WriteHeader(hdr); err != nil {
		it.release()
		return fmt.Errorf("tar header of %s: %w", it.rel, err)
	}
	if it.info.IsDir() {
		p.report(stack.Result{Name: it.name})
		return nil
	}
	p.cur, p.off, p.fault, p.good = it, 0, nil, -1
	if p.h != nil {
		p.h.Reset()
	}
	return nil
}

// write writes data of the current member.
func (p *packer) write(b []byte) error {
	n, err := p.tw.Write(b)
	if p.h != nil {
		p.h.Write(b[:n])
	}
	p.off += int64(n)
	return err
}

// end reports the current member, all of it written.
func (p *packer) end(it *item) {
	res := stack.Result{Name: it.name, Size: it.size}
	if p.fault == nil && !it.whole {
		var one [1]byte
		if n, _ := it.f.ReadAt(one[:], it.size); n > 0 {
			p.fault = fmt.Errorf("%s grew past %d bytes while read; the rest is left out: %w", path.Join(p.root, it.rel), it.size, ErrChanged)
		}
	}
	switch {
	case p.fault != nil:
		res.Err = p.fault
		if p.good >= 0 {
			res.Size = p.good
		}
	case p.h != nil:
		res.Sum = hexSum(p.h)
	}
	it.release()
	p.cur = nil
	p.report(res)
}

// Abort stops a Read under way; Close then releases the rest.
func (p *packer) Abort(error) { p.pipe.cancel() }

// Close stops the pipeline and releases the files it holds open. It must
// not run with Read.
func (p *packer) Close() error {
	p.pipe.stop()
	if p.cur != nil {
		p.cur.release()
		p.cur = nil
	}
	return nil
}

// outBuf is where tw writes: into the buffer of the Read under way, and
// what does not fit (a header at the end of it) into spill, for the next.
type outBuf struct {
	p     []byte
	n     int
	spill []byte
	off   int // of spill, already read
}

func (o *outBuf) Write(b []byte) (int, error) {
	if len(b) > 0 && o.n < len(o.p) && &b[0] == &o.p[o.n] {
		o.n += len(b) // read in place by step
		return len(b), nil
	}
	c := copy(o.p[o.n:], b)
	o.n += c
	o.spill = append(o.spill, b[c:]...)
	return len(b), nil
}
