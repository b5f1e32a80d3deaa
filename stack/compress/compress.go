// Package compress is the zstd layer: a filter that compresses what a
// transfer reads from the layers below it and decompresses what it writes
// to them, so that compressible data (text, tables, tar streams of source
// trees) crosses the network smaller. Both ends must stack it: ferry's
// engine does so only when asked (--compress) and both ends offer it.
//
// The stream is a zstd frame sequence, compressed at the fastest level on
// one core per transfer: the layer is worth its CPU only where the link,
// not the processor, limits the transfer. What it writes to a file is
// bounded by Env.MaxFile, so a small compressed stream cannot make a file
// larger than the server takes (a tar layer bounds each member itself).
package compress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"ferry/stack"
)

// Name is the layer's name in a stack.
const Name = "zstd"

// Kinds is the zstd layer, for a server's registry.
func Kinds() stack.Registry {
	return stack.Registry{Name: {Filter: newLayer}}
}

type layer struct{ maxOut int64 }

func newLayer(e stack.Entry, env stack.Env) (stack.Filter, error) {
	if len(e.Opts) > 0 {
		return nil, stack.Refuse(fmt.Sprintf("%s takes no options.", e.Name))
	}
	return layer{maxOut: env.MaxFile}, nil
}

// encoders and decoders are reused across transfers: each holds megabytes
// of tables.
var (
	encoders sync.Pool
	decoders sync.Pool
)

// copyBuf is the size of the buffers data is copied through.
const copyBuf = 256 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// WrapSource compresses what the layer below gives, read from start to
// end: the result has no size and cannot seek.
func (l layer) WrapSource(_ context.Context, _ *stack.Transfer, below stack.Source) (stack.Source, error) {
	r, err := reader(below)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	s := &source{PipeReader: pr, below: below, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		enc, _ := encoders.Get().(*zstd.Encoder)
		if enc == nil {
			var err error
			if enc, err = zstd.NewWriter(pw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)); err != nil {
				pw.CloseWithError(err)
				return
			}
		} else {
			enc.Reset(pw)
		}
		buf := bufs.Get().(*[]byte)
		_, err := io.CopyBuffer(enc, r, *buf)
		bufs.Put(buf)
		err = errors.Join(err, enc.Close())
		encoders.Put(enc)
		pw.CloseWithError(err) // nil: io.EOF for the reader
	}()
	return s, nil
}

// reader reads a Source from start to end.
func reader(s stack.Source) (io.Reader, error) {
	if r, ok := s.(io.Reader); ok {
		return r, nil
	}
	ra, ok1 := s.(io.ReaderAt)
	sz, ok2 := s.(stack.Sizer)
	if !ok1 || !ok2 {
		return nil, errors.New("zstd: the layer below cannot be read")
	}
	return io.NewSectionReader(ra, 0, sz.Size()), nil
}

// source is the compressed stream of a transfer being read.
type source struct {
	*io.PipeReader
	below stack.Source
	done  chan struct{}
}

func (s *source) Close() error {
	s.PipeReader.Close() // the compressor stops at its next write
	<-s.done
	return s.below.Close()
}

func (s *source) Abort(cause error) {
	s.PipeReader.CloseWithError(cause)
	if a, ok := s.below.(stack.Aborter); ok {
		a.Abort(cause)
	}
}

// WrapSink decompresses what the transfer writes, from start to end, into
// the layer below.
func (l layer) WrapSink(_ context.Context, _ *stack.Transfer, below stack.Sink) (stack.Sink, error) {
	w, err := writer(below)
	if err != nil {
		return nil, err
	}
	if _, file := below.(io.WriterAt); file && l.maxOut > 0 {
		w = &capped{w: w, left: l.maxOut} // a tar layer below bounds each member itself
	}
	pr, pw := io.Pipe()
	s := &sink{PipeWriter: pw, below: below, done: make(chan error, 1)}
	go func() {
		dec, _ := decoders.Get().(*zstd.Decoder)
		var err error
		if dec == nil {
			dec, err = zstd.NewReader(pr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		} else {
			err = dec.Reset(pr)
		}
		if err == nil {
			buf := bufs.Get().(*[]byte)
			_, err = io.CopyBuffer(w, dec, *buf)
			bufs.Put(buf)
			dec.Reset(nil)
			decoders.Put(dec)
		}
		if err != nil {
			err = fmt.Errorf("zstd: %w", err)
		}
		pr.CloseWithError(err) // a writer still writing learns of it
		s.done <- err
	}()
	return s, nil
}

// writer writes a Sink from start to end.
func writer(s stack.Sink) (io.Writer, error) {
	if w, ok := s.(io.Writer); ok {
		return w, nil
	}
	if wa, ok := s.(io.WriterAt); ok {
		return io.NewOffsetWriter(wa, 0), nil
	}
	return nil, errors.New("zstd: the layer below cannot be written")
}

// sink is a transfer's compressed stream being written.
type sink struct {
	*io.PipeWriter
	below   stack.Sink
	done    chan error
	aborted atomic.Bool
}

// Close ends the compressed stream and waits for the last of it below: a
// stream cut short or corrupt fails the transfer.
func (s *sink) Close() error {
	s.PipeWriter.Close()
	err := <-s.done
	if err != nil && !s.aborted.Load() {
		return stack.End(s.below, err)
	}
	return errors.Join(err, s.below.Close())
}

func (s *sink) Abort(cause error) {
	s.aborted.Store(true)
	s.PipeWriter.CloseWithError(cause)
	if a, ok := s.below.(stack.Aborter); ok {
		a.Abort(cause)
	}
}

// capped fails once more than left bytes would be written.
type capped struct {
	w    io.Writer
	left int64
}

// errTooLarge is decompressed data past the largest file the server takes.
var errTooLarge = errors.New("decompressed data larger than the largest file this server takes")

func (c *capped) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, errTooLarge
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
