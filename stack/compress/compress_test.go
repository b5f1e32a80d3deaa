package compress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"ferry/stack"
)

// memFile is a file layer's Source and Sink in memory.
type memFile struct {
	bytes.Reader
	out     []byte
	closed  bool
	aborted error
}

func (m *memFile) Size() int64 { return m.Reader.Size() }
func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.out) {
		m.out = append(m.out, make([]byte, end-len(m.out))...)
	}
	return copy(m.out[off:], p), nil
}
func (m *memFile) Close() error      { m.closed = true; return nil }
func (m *memFile) Abort(cause error) { m.aborted = cause }

func build(t *testing.T, maxFile int64) stack.Filter {
	t.Helper()
	f, err := newLayer(stack.Entry{Name: Name}, stack.Env{MaxFile: maxFile})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRoundTrip(t *testing.T) {
	l := build(t, 0)
	for _, data := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ferry moves research data. "), 200000)} {
		in := &memFile{}
		in.Reset(data)
		src, err := l.WrapSource(context.Background(), &stack.Transfer{}, in)
		if err != nil {
			t.Fatal(err)
		}
		packed, err := io.ReadAll(src.(io.Reader))
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Close(); err != nil || !in.closed {
			t.Fatalf("source close: %v, below closed %v", err, in.closed)
		}
		if len(data) > 1<<20 && len(packed)*20 > len(data) {
			t.Errorf("%d bytes packed into %d", len(data), len(packed))
		}
		out := &memFile{}
		sink, err := l.WrapSink(context.Background(), &stack.Transfer{}, out)
		if err != nil {
			t.Fatal(err)
		}
		for b := packed; len(b) > 0; {
			n := min(len(b), 1000)
			if _, err := sink.(io.Writer).Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := sink.Close(); err != nil || !out.closed {
			t.Fatalf("sink close: %v, below closed %v", err, out.closed)
		}
		if !bytes.Equal(out.out, data) {
			t.Errorf("%d bytes came out of %d", len(out.out), len(data))
		}
	}
}

func TestBadStreams(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, 8<<20), nil)
	valid := enc.EncodeAll([]byte(strings.Repeat("data ", 1000)), nil)
	for _, tc := range []struct {
		name    string
		stream  []byte
		maxFile int64
		want    string
	}{
		{"garbage", []byte("this is not zstd at all"), 0, "zstd"},
		{"cut short", valid[:len(valid)/2], 0, "zstd"},
		{"past the largest file", bomb, 1 << 20, "larger than the largest file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &memFile{}
			sink, err := build(t, tc.maxFile).WrapSink(context.Background(), &stack.Transfer{}, out)
			if err != nil {
				t.Fatal(err)
			}
			sink.(io.Writer).Write(tc.stream) // may fail already
			err = sink.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Close = %v, want %q", err, tc.want)
			}
			if out.aborted == nil {
				t.Error("the layer below was not aborted")
			}
			if len(out.out) > 1<<20 {
				t.Errorf("%d bytes written below", len(out.out))
			}
		})
	}
}

func TestAbort(t *testing.T) {
	cause := errors.New("transfer aborted")
	out := &memFile{}
	sink, _ := build(t, 0).WrapSink(context.Background(), &stack.Transfer{}, out)
	sink.(stack.Aborter).Abort(cause)
	if _, err := sink.(io.Writer).Write([]byte("x")); err == nil {
		t.Error("a write after Abort succeeded")
	}
	if stack.End(sink, cause) != cause || out.aborted != cause {
		t.Errorf("below aborted with %v", out.aborted)
	}
	in := &memFile{}
	in.Reset(make([]byte, 10<<20))
	src, _ := build(t, 0).WrapSource(context.Background(), &stack.Transfer{}, in)
	src.(stack.Aborter).Abort(cause)
	if _, err := io.ReadAll(src.(io.Reader)); err == nil {
		t.Errorf("read after Abort: %v", err)
	}
	src.Close()
	if in.aborted != cause || !in.closed {
		t.Errorf("below: aborted %v, closed %v", in.aborted, in.closed)
	}
}
