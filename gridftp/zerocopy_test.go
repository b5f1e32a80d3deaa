package gridftp_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"ferry/gridftp"
)

// spliceCounter is a Receiver's Dst over a file that counts what reaches
// the file through WriteAt and what it offers to splice (FileAt), and
// refuses offers past limit.
type spliceCounter struct {
	f       *os.File
	limit   int64
	written atomic.Int64 // bytes through WriteAt
	offers  atomic.Int64 // FileAt calls
}

func (d *spliceCounter) WriteAt(p []byte, off int64) (int, error) {
	d.written.Add(int64(len(p)))
	return d.f.WriteAt(p, off)
}

func (d *spliceCounter) FileAt(off, n int64) (*os.File, error) {
	d.offers.Add(1)
	if off+n > d.limit {
		return nil, errors.New("past the limit")
	}
	return d.f, nil
}

// sendFileTo sends [0, size) of src, base 0, over n loopback streams in
// blocks of bs to r, and returns Send's error and Run's.
func sendFileTo(t *testing.T, src *os.File, size int64, bs, n int, r *gridftp.Receiver) (sendErr, runErr error) {
	t.Helper()
	recv, conns := loopbackStreams(t, n)
	senders := make([]*gridftp.Stream, n)
	for i, c := range conns {
		senders[i] = gridftp.NewStream(c)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		plan := gridftp.NewPlan([]gridftp.Range{{Start: 0, End: size}}, bs)
		sendErr = gridftp.Send(context.Background(), senders, plan, src, 0, gridftp.NewBufferPool(bs), nil)
		if sendErr != nil {
			for _, c := range conns {
				c.Close()
			}
		}
	})
	_, runErr = r.Run(context.Background(), recv, nil, nil)
	wg.Wait()
	return sendErr, runErr
}

// TestZeroCopy: a file sent over bare TCP streams on loopback (through
// buffers: same host) into a file (splice) arrives whole, its ranges recorded, with most of it spliced
// rather than written from a buffer; with a live hash the buffers carry
// it and the sum is right; a file shorter than announced fails the send;
// a splice past the destination's limit fails the transfer.
func TestZeroCopy(t *testing.T) {
	data := randomData(t, 5<<20+123)
	tests := []struct {
		name      string
		streams   int
		block     int
		announce  int64 // bytes the plan sends; 0: all
		limit     int64 // the destination's; 0: none
		hash      bool
		wantErr   string // in Send's or Run's error
		spliceMin int64  // bytes at least that must not go through WriteAt
	}{
		{name: "one stream", streams: 1, block: 1 << 20, spliceMin: 4 << 20},
		{name: "three streams, small blocks", streams: 3, block: 200 << 10, spliceMin: 2 << 20},
		{name: "live hash: through buffers", streams: 1, block: 1 << 20, hash: true},
		{name: "source shorter than announced", streams: 2, block: 1 << 20, announce: int64(len(data)) + 4096, wantErr: "source shorter than announced"},
		{name: "past the destination's limit", streams: 1, block: 1 << 20, limit: 3 << 20, wantErr: "past the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := gridftp.TempFile(t, "src", data)
			dst := &spliceCounter{f: gridftp.TempFile(t, "dst", nil), limit: cmpOr(tt.limit, 1<<40)}
			r := &gridftp.Receiver{Dst: dst, Pool: gridftp.NewBufferPool(tt.block)}
			if tt.hash {
				r.Hash = md5.New()
			}
			size := cmpOr(tt.announce, int64(len(data)))
			sendErr, runErr := sendFileTo(t, src, size, tt.block, tt.streams, r)
			if tt.wantErr != "" {
				if err := errors.Join(sendErr, runErr); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("errors %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if sendErr != nil || runErr != nil {
				t.Fatalf("send: %v; receive: %v", sendErr, runErr)
			}
			got, err := io.ReadAll(io.NewSectionReader(dst.f, 0, 1<<40))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the destination holds %d bytes (%v), not the %d sent", len(got), err, len(data))
			}
			if rs := r.Ranges(); !rs.Contains(0, int64(len(data))) || rs.Total() != int64(len(data)) {
				t.Errorf("ranges %v, want all of [0, %d)", rs, len(data))
			}
			if r.Bytes() != int64(len(data)) {
				t.Errorf("%d bytes counted, want %d", r.Bytes(), len(data))
			}
			if spliced := int64(len(data)) - dst.written.Load(); spliced < tt.spliceMin {
				t.Errorf("%d bytes spliced, want at least %d", spliced, tt.spliceMin)
			}
			if tt.hash {
				if sum, _, ok := r.Sum(); !ok || !bytes.Equal(sum, md5Of(data)) {
					t.Errorf("live sum %x (ok %v), want %x", sum, ok, md5Of(data))
				}
				if dst.written.Load() != int64(len(data)) {
					t.Errorf("%d bytes through WriteAt with a hash, want all %d", dst.written.Load(), len(data))
				}
			}
		})
	}
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}
