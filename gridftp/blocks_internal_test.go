package gridftp

import (
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestBlockLimit: a block to another host carries about one congestion
// window, in whole multiples of minBlock (the sender caps it at its block
// size); to this host (no window known) as much as the sender's block.
func TestBlockLimit(t *testing.T) {
	for _, tt := range []struct {
		name      string
		win, want int
	}{
		{"window not known", 0, math.MaxInt},
		{"initial window", 10 * 1448, minBlock},
		{"small window, rounded up", 50 * 1448, 2 * minBlock},
		{"window of a block", 1 << 20, 1 << 20},
		{"large window", 3000 * 1448, 67 * minBlock},
	} {
		if got := blockLimit(tt.win); got != tt.want {
			t.Errorf("%s: blockLimit(%d) = %d, want %d", tt.name, tt.win, got, tt.want)
		}
	}
}

// TestPlanNextUpTo: a plan hands out blocks of at most its block size and
// the limit asked, in order, across its segments.
func TestPlanNextUpTo(t *testing.T) {
	p := NewPlan([]Range{{0, 10}, {20, 23}}, 4)
	type blk struct{ off, n int64 }
	var got []blk
	for _, limit := range []int64{100, 2, 3, 100, 100} {
		off, n, ok := p.NextUpTo(limit)
		if !ok {
			break
		}
		got = append(got, blk{off, n})
	}
	want := []blk{{0, 4}, {4, 2}, {6, 3}, {9, 1}, {20, 3}}
	if !slices.Equal(got, want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
	if _, _, ok := p.Next(); ok {
		t.Error("a plan handed out past its end")
	}
}

// TestBlockSendersLimit: a block sender for a source read in order
// (SendStream) cuts its blocks to the stream's limit; one for blocks made
// elsewhere (SendFunc: a forwarding layer's, which must not be cut or a
// block's tail would be lost) hands next a whole block whatever the limit.
func TestBlockSendersLimit(t *testing.T) {
	const block, limit = 256 << 10, 64 << 10
	for _, tt := range []struct {
		name   string
		sender func(*BufferPool, func([]byte) (int64, int, error)) func(net.Conn, int) (int, error)
		want   int
	}{
		{"read in order", buffered, limit},
		{"made elsewhere", whole, block},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, s := net.Pipe()
			defer c.Close()
			go io.Copy(io.Discard, s)
			var got int
			send := tt.sender(NewBufferPool(block), func(p []byte) (int64, int, error) {
				got = len(p)
				return 0, len(p), nil
			})
			if n, err := send(c, limit); err != nil || n != tt.want || got != tt.want {
				t.Errorf("sent %d (%v), next given %d bytes; want %d", n, err, got, tt.want)
			}
		})
	}
}

// TempFile makes a file in the test's directory holding data, closed when
// the test ends: for the package's tests, internal and external.
func TempFile(t *testing.T, name string, data []byte) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f
}
