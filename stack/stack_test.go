package stack_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/stack"
	"ferry/storage"
	"ferry/storage/posix"
)

// pipeSink is a sequential sink, like a program's stdin.
type pipeSink struct {
	bytes.Buffer
	closed, aborted bool
	cause           error
}

func (p *pipeSink) Close() error      { p.closed = true; return nil }
func (p *pipeSink) Abort(cause error) { p.aborted, p.cause = true, cause }

// pipe is a terminal whose sinks are sequential.
type pipe struct{ last *pipeSink }

func (p *pipe) Create(context.Context, *stack.Transfer) (stack.Sink, error) {
	p.last = &pipeSink{}
	return p.last, nil
}

func (p *pipe) Open(context.Context, *stack.Transfer) (stack.Source, error) {
	return io.NopCloser(strings.NewReader("out")), nil
}

func registry(p *pipe) stack.Registry {
	reg := stack.Kinds()
	reg["pipe"] = stack.Kind{Terminal: func(stack.Entry, stack.Env) (stack.Terminal, error) { return p, nil }}
	return reg
}

func build(t *testing.T, spec string, reg stack.Registry, env stack.Env) (*stack.Stack, error) {
	t.Helper()
	entries, err := stack.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return stack.Build(spec, entries, reg, env)
}

// TestBuild: the refusals say what GCT's do; a filter alone stands on
// the file layer.
func TestBuild(t *testing.T) {
	reg := registry(&pipe{})
	for _, tt := range []struct {
		spec    string
		refusal string // "" when the stack builds
	}{
		{"file", ""},
		{"pipe", ""},
		{"pipe,ordering", ""},
		{"ordering", ""},
		{"bogus", "globus_xio: Bad parameter, bogus driver not whitelisted"},
		{"file,bogus:x=1", "globus_xio: Bad parameter, bogus driver not whitelisted"},
		{"FILE", "globus_xio: Bad parameter, FILE driver not whitelisted"},
		{"pipe,,ordering", "globus_xio: Bad parameter,  driver not whitelisted"},
		{"pipe,file", "file must be the bottom of the stack."},
		{"file:x=1", "file takes no options."},
	} {
		_, err := build(t, tt.spec, reg, stack.Env{})
		var r *stack.Refusal
		switch {
		case tt.refusal == "" && err != nil:
			t.Errorf("%s: %v", tt.spec, err)
		case tt.refusal != "" && (!errors.As(err, &r) || strings.Join(r.Lines, "|") != tt.refusal):
			t.Errorf("%s: %v, want refusal %q", tt.spec, err, tt.refusal)
		}
	}
}

// TestFileLayer: the file layer reads and writes the driver's files; a
// filter on a file changes nothing.
func TestFileLayer(t *testing.T) {
	fs, err := posix.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	s, err := build(t, "ordering", stack.Kinds(), stack.Env{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sink, err := s.Create(ctx, &stack.Transfer{Name: "/f", Flag: storage.Truncate})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := sink.(storage.File)
	if !ok {
		t.Fatalf("the file layer's sink is a %T, not the storage.File", sink)
	}
	w.WriteAt([]byte("world"), 6)
	w.WriteAt([]byte("hello "), 0)
	if err := stack.End(sink, nil); err != nil {
		t.Fatal(err)
	}
	src, err := s.Open(ctx, &stack.Transfer{Name: "/f"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	buf := make([]byte, src.(stack.Sizer).Size())
	if _, err := src.(io.ReaderAt).ReadAt(buf, 0); err != nil || string(buf) != "hello world" {
		t.Fatalf("read back %q, %v", buf, err)
	}
	if err := fs.Mkdir(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, &stack.Transfer{Name: "/d"}); !errors.Is(err, storage.ErrIsDir) {
		t.Fatalf("open a directory: %v", err)
	}
}

// TestOrdering: blocks written at once from many goroutines in any order
// reach a sequential sink in order; an abort wakes the writers that wait.
func TestOrdering(t *testing.T) {
	p := &pipe{}
	s, err := build(t, "pipe,ordering", registry(p), stack.Env{})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := s.Create(context.Background(), &stack.Transfer{Name: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	w := sink.(io.WriterAt)
	const streams, blocks, size = 8, 400, 100
	want := make([]byte, blocks*size)
	for i := range want {
		want[i] = byte(rand.IntN(256))
	}
	// Stream k carries blocks k, k+streams, …, as a MODE E sender deals
	// them; each stream's blocks come in order.
	var wg sync.WaitGroup
	for k := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := k; b < blocks; b += streams {
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
				if _, err := w.WriteAt(want[b*size:(b+1)*size], int64(b*size)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := stack.End(sink, nil); err != nil || !p.last.closed {
		t.Fatalf("close: %v, closed %v", err, p.last.closed)
	}
	if !bytes.Equal(p.last.Bytes(), want) {
		t.Fatal("the sink got the blocks out of order")
	}

	sink, _ = s.Create(context.Background(), &stack.Transfer{Name: "/x"})
	w = sink.(io.WriterAt)
	errc := make(chan error)
	big := make([]byte, stack.OrderingWindow+1) // more than the window: it waits
	go func() { _, err := w.WriteAt(big, 100); errc <- err }()
	cause := errors.New("stream lost")
	time.Sleep(10 * time.Millisecond)
	stack.End(sink, cause)
	select {
	case err := <-errc:
		if !errors.Is(err, cause) {
			t.Fatalf("the waiting writer got %v, want %v", err, cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a writer waiting for its turn was not woken by the abort")
	}
	if !p.last.aborted || !errors.Is(p.last.cause, cause) {
		t.Fatal("the abort did not reach the layer below")
	}
	if _, err := w.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("a write after the abort succeeded")
	}
}

// TestOrderingBackwards: streams that each send their blocks backwards,
// as a MODE E sender may, still get through while the early blocks fit
// the window; a gap left at the end fails the close.
func TestOrderingBackwards(t *testing.T) {
	p := &pipe{}
	s, err := build(t, "pipe,ordering", registry(p), stack.Env{})
	if err != nil {
		t.Fatal(err)
	}
	sink, _ := s.Create(context.Background(), &stack.Transfer{})
	w := sink.(io.WriterAt)
	want := make([]byte, 64<<10)
	for i := range want {
		want[i] = byte(i / 7)
	}
	const streams, size = 4, 1000
	var wg sync.WaitGroup
	for k := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var offs []int
			for off := k * size; off < len(want); off += streams * size {
				offs = append(offs, off)
			}
			for i := len(offs) - 1; i >= 0; i-- {
				off := offs[i]
				if _, err := w.WriteAt(want[off:min(off+size, len(want))], int64(off)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := stack.End(sink, nil); err != nil || !bytes.Equal(p.last.Bytes(), want) {
		t.Fatalf("close %v; the sink got %d bytes, in order: %v", err, p.last.Len(), bytes.Equal(p.last.Bytes(), want))
	}

	sink, _ = s.Create(context.Background(), &stack.Transfer{})
	w = sink.(io.WriterAt)
	w.WriteAt([]byte("abc"), 0)
	w.WriteAt([]byte("xyz"), 10)
	if err := stack.End(sink, nil); err == nil || !p.last.aborted {
		t.Fatalf("a gap closed without an error (%v) or an abort below", err)
	}
}

// lazy is a filter that opens the layers below a write only when told to.
type lazy struct{ open bool }

func (l lazy) WrapSink(_ context.Context, _ *stack.Transfer, below stack.Sink) (stack.Sink, error) {
	return below, nil
}

func (l lazy) WrapSource(_ context.Context, _ *stack.Transfer, below stack.Source) (stack.Source, error) {
	return below, nil
}

func (l lazy) DeferSink(_ context.Context, _ *stack.Transfer, open func() (stack.Sink, error)) (stack.Sink, error) {
	if l.open {
		return open()
	}
	return &pipeSink{}, nil
}

// TestDeferrer: a Deferrer opens the layers below it (the terminal and
// the filters between) itself, or never.
func TestDeferrer(t *testing.T) {
	for _, open := range []bool{false, true} {
		p := &pipe{}
		reg := registry(p)
		reg["lazy"] = stack.Kind{Filter: func(stack.Entry, stack.Env) (stack.Filter, error) { return lazy{open}, nil }}
		s, err := build(t, "pipe,ordering,lazy,ordering", reg, stack.Env{})
		if err != nil {
			t.Fatal(err)
		}
		sink, err := s.Create(context.Background(), &stack.Transfer{Name: "/x"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sink.(io.WriterAt); !ok {
			t.Errorf("open %v: the filter above the deferrer did not wrap its sink", open)
		}
		if opened := p.last != nil; opened != open {
			t.Errorf("open %v: the terminal was opened: %v", open, opened)
		}
	}
}
