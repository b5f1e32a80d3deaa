package gridftp

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// sliceAt is an io.WriterAt over a byte slice.
type sliceAt []byte

func (s sliceAt) WriteAt(p []byte, off int64) (int, error) { return copy(s[off:], p), nil }

// TestSplicerDrain: when the file refuses a splice, what the pipe holds
// is written at its offset through the buffer, counted, and the caller
// told to go on through buffers (errNoZeroCopy).
func TestSplicerDrain(t *testing.T) {
	sp, err := newSplicer()
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	data := bytes.Repeat([]byte("ferry"), 10_000)
	if n, err := unix.Write(sp.w, data); err != nil || n != len(data) {
		t.Fatalf("pipe write: %d, %v", n, err)
	}
	dst := make(sliceAt, 100+len(data))
	n, err := sp.drain(dst, make([]byte, 4096), 100, len(data))
	if n != int64(len(data)) || !errors.Is(err, errNoZeroCopy) {
		t.Fatalf("drain = %d, %v; want %d, errNoZeroCopy", n, err, len(data))
	}
	if !bytes.Equal(dst[100:], data) {
		t.Error("the destination does not hold what the pipe held")
	}
}
