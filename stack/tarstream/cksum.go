package tarstream

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"ferry/checksum"
	"ferry/stack"
	"ferry/storage"
)

// The cksum layer: RETR of a directory is md5sum's lines for its files.

type cksumLayer struct {
	env stack.Env
	alg string
}

func newCksum(e stack.Entry, env stack.Env) (stack.Terminal, error) {
	alg, err := options(e, "alg", checksum.MD5)
	if err != nil {
		return nil, err
	}
	return &cksumLayer{env: env, alg: alg}, nil
}

// Create refuses: the layer only lists.
func (l *cksumLayer) Create(context.Context, *stack.Transfer) (stack.Sink, error) {
	return nil, &stack.ShownError{Text: "The cksum layer only lists checksums (RETR); it cannot store.", Err: storage.ErrPermission}
}

// Open lists the checksums of the members of the directory t.Name, or of
// every regular file below it: the Source is an io.Reader.
func (l *cksumLayer) Open(ctx context.Context, t *stack.Transfer) (stack.Source, error) {
	if err := checkDir(ctx, l.env.FS, CksumLayer, t.Name); err != nil {
		return nil, err
	}
	c := &lister{fs: l.env.FS, root: t.Name, alg: l.alg, report: reporter(t)}
	c.pipe = startPipeline(ctx, l.env.FS, t.Name, t.Members, false, c.prepare)
	return c, nil
}

// lister is the lines of a checksum list, made as they are read.
type lister struct {
	fs     storage.Driver
	root   string
	alg    string
	report func(stack.Result)
	pipe   *pipeline
	line   []byte
	rest   []byte // of line, not yet read
	err    error
}

// prepare, in a pipeline worker, hashes a member.
func (c *lister) prepare(ctx context.Context, it *item) {
	name := path.Join(c.root, it.rel)
	f, err := openMember(ctx, c.fs, c.root, it)
	if err != nil {
		it.err = err
		return
	}
	defer f.Close()
	h := newHash(c.alg)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	for {
		if err := ctx.Err(); err != nil {
			it.err = err
			return
		}
		n, err := f.ReadAt(*bp, it.size)
		h.Write((*bp)[:n])
		it.size += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			it.err = fmt.Errorf("read %s: %w", name, err)
			return
		}
	}
	it.sum = hexSum(h)
}

// Read writes the next lines into b.
func (c *lister) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if len(c.rest) > 0 {
			k := copy(b[n:], c.rest)
			c.rest = c.rest[k:]
			n += k
			continue
		}
		if c.err != nil {
			break
		}
		var it *item
		if it, c.err = c.pipe.next(); c.err == nil && it == nil {
			c.err = io.EOF
		}
		if it == nil {
			continue
		}
		if it.err != nil {
			c.report(stack.Result{Name: it.name, Err: it.err})
			continue
		}
		c.line = appendLine(c.line[:0], it.sum, it.rel)
		c.rest = c.line
		c.report(stack.Result{Name: it.name, Size: it.size, Sum: it.sum})
	}
	if n > 0 {
		return n, nil
	}
	return 0, c.err
}

// appendLine appends md5sum's line for a file: a name with a backslash,
// newline or carriage return is escaped, and the line starts with a
// backslash, as GNU md5sum writes it.
func appendLine(b []byte, sum, name string) []byte {
	if strings.ContainsAny(name, "\\\n\r") {
		b = append(b, '\\')
		name = strings.NewReplacer("\\", "\\\\", "\n", "\\n", "\r", "\\r").Replace(name)
	}
	b = append(b, sum...)
	b = append(b, "  "...)
	b = append(b, name...)
	return append(b, '\n')
}

// Abort stops a Read under way; Close then releases the rest.
func (c *lister) Abort(error) { c.pipe.cancel() }

// Close stops the pipeline.
func (c *lister) Close() error {
	c.pipe.stop()
	return nil
}
