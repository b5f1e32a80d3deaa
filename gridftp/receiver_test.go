package gridftp_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ferry/gridftp"
)

// memFile is a file in memory.
type memFile struct {
	mu sync.Mutex
	b  []byte
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := int(off) + len(p); end > len(f.b) {
		f.b = append(f.b, make([]byte, end-len(f.b))...)
	}
	return copy(f.b[off:], p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) bytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.b)
}

// writeOnly hides ReadAt: nothing can be read back.
type writeOnly struct{ f *memFile }

func (w writeOnly) WriteAt(p []byte, off int64) (int, error) { return w.f.WriteAt(p, off) }

// corrupting flips the byte at `at` in the write that covers it, as a
// faulty storage layer would.
type corrupting struct {
	*memFile
	at int64
}

func (c corrupting) WriteAt(p []byte, off int64) (int, error) {
	if off <= c.at && c.at < off+int64(len(p)) {
		q := bytes.Clone(p)
		q[c.at-off] ^= 0xff
		p = q
	}
	return c.memFile.WriteAt(p, off)
}

func randomData(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func modeEBlock(off int, payload []byte) []byte {
	b := make([]byte, gridftp.HeaderLen, gridftp.HeaderLen+len(payload))
	gridftp.Header{Count: uint64(len(payload)), Offset: uint64(off)}.Put(b)
	return append(b, payload...)
}

func modeEEnd(last bool, streams int) []byte {
	b := make([]byte, gridftp.HeaderLen)
	h := gridftp.Header{Desc: gridftp.DescEOD}
	if last {
		h = gridftp.Header{Desc: gridftp.DescEOD | gridftp.DescEOF, Offset: uint64(streams)}
	}
	h.Put(b)
	return b
}

// deal gives the blocks of data (size bs) to n streams in turn; with
// reverse each stream sends its share last block first, so that almost
// every block arrives ahead of a gap.
func deal(data []byte, bs, n int, reverse bool) [][][]byte {
	out := make([][][]byte, n)
	for i, off := 0, 0; off < len(data); i, off = i+1, off+bs {
		out[i%n] = append(out[i%n], modeEBlock(off, data[off:min(off+bs, len(data))]))
	}
	if reverse {
		for _, s := range out {
			for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return out
}

// loopbackStreams returns n connected TCP pairs: the receiving ends as
// streams, and the sending ends.
func loopbackStreams(t testing.TB, n int) ([]*gridftp.Stream, []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var streams []*gridftp.Stream
	var senders []net.Conn
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		streams = append(streams, gridftp.NewStream(s))
		senders = append(senders, c)
	}
	return streams, senders
}

// receive runs r over one stream per element of blocks; stream i sends
// blocks[i] and its EOD (the last one the EOF). before, when set, runs
// once every stream but the first has sent its blocks, before the first
// sends its own.
func receive(t testing.TB, r *gridftp.Receiver, blocks [][][]byte, before func()) error {
	t.Helper()
	streams, senders := loopbackStreams(t, len(blocks))
	var wg sync.WaitGroup
	var others sync.WaitGroup
	others.Add(len(blocks) - 1)
	for i, c := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 && before != nil {
				others.Wait()
				before()
			}
			for _, b := range blocks[i] {
				if _, err := c.Write(b); err != nil {
					return
				}
			}
			if i > 0 {
				others.Done()
			}
			c.Write(modeEEnd(i == len(senders)-1, len(senders)))
		}()
	}
	_, err := r.Run(context.Background(), streams, nil, nil)
	wg.Wait()
	return err
}

func md5Of(b []byte) []byte { s := md5.Sum(b); return s[:] }

// TestReceiverLiveSumOutOfOrder: with several streams and blocks out of
// order the live sum is still the hash of the data in file order, whether
// it is taken from the buffers written or read back, and whether a block
// fits the receiving buffer or takes several.
func TestReceiverLiveSumOutOfOrder(t *testing.T) {
	data := randomData(t, 1<<20+4321)
	for _, tc := range []struct {
		name          string
		streams, bs   int
		pool          int
		reverse, back bool
	}{
		{"one stream in order", 1, 64 << 10, 64 << 10, false, false},
		{"one stream in order, read back", 1, 64 << 10, 64 << 10, false, true},
		{"three streams", 3, 10000, 64 << 10, false, false},
		{"three streams reversed", 3, 10000, 64 << 10, true, false},
		{"three streams reversed, read back", 3, 10000, 64 << 10, true, true},
		{"blocks larger than buffers", 2, 50000, 16 << 10, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := &memFile{}
			r := &gridftp.Receiver{Dst: dst, Pool: gridftp.NewBufferPool(tc.pool), Hash: md5.New(), ReadBack: tc.back, Timeout: 10 * time.Second}
			if err := receive(t, r, deal(data, tc.bs, tc.streams, tc.reverse), nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst.bytes(), data) {
				t.Fatal("data differs")
			}
			sum, n, ok := r.Sum()
			if !ok || n != int64(len(data)) || !bytes.Equal(sum, md5Of(data)) {
				t.Fatalf("Sum = %x, %d, %v; want %x, %d, true", sum, n, ok, md5Of(data), len(data))
			}
		})
	}
}

// gapFirst sends block 0 on one stream and every other block on another;
// with waitRest as receive's before, block 0 comes last.
func gapFirst(data []byte, bs int) [][][]byte {
	all := deal(data, bs, 1, false)[0]
	return [][][]byte{all[:1], all[1:]}
}

// waitRest waits until all but the first block of data (size bs) are in.
func waitRest(r *gridftp.Receiver, data []byte, bs int) func() {
	return func() {
		for deadline := time.Now().Add(5 * time.Second); r.Bytes() < int64(len(data)-bs) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestReceiverLiveSumGapFilledLast: everything but the first block is in
// before the first arrives; the stream that brings it reads the rest back.
func TestReceiverLiveSumGapFilledLast(t *testing.T) {
	data := randomData(t, 3<<20+17)
	const bs = 100000
	dst := &memFile{}
	r := &gridftp.Receiver{Dst: dst, Base: 5, Pool: gridftp.NewBufferPool(64 << 10), Hash: md5.New(), Timeout: 10 * time.Second}
	var first int64
	wait := waitRest(r, data, bs)
	if err := receive(t, r, gapFirst(data, bs), func() { wait(); first = r.Bytes() }); err != nil {
		t.Fatal(err)
	}
	if first != int64(len(data)-bs) {
		t.Fatalf("%d bytes in before the first block, want %d", first, len(data)-bs)
	}
	if got := dst.bytes(); len(got) != 5+len(data) || !bytes.Equal(got[5:], data) {
		t.Fatal("data differs")
	}
	if sum, n, ok := r.Sum(); !ok || n != int64(len(data)) || !bytes.Equal(sum, md5Of(data)) {
		t.Fatalf("Sum = %x, %d, %v; want %x, %d, true", sum, n, ok, md5Of(data), len(data))
	}
}

// TestReceiverLiveSumNoReadBack: blocks ahead of a gap need a Dst that can
// be read; without one there is no live sum, rather than a wrong one.
func TestReceiverLiveSumNoReadBack(t *testing.T) {
	data := randomData(t, 300000)
	for _, tc := range []struct {
		name          string
		streams       int
		reverse, back bool
		ok            bool
	}{
		{"in order", 1, false, false, true},
		{"in order, read back", 1, false, true, false},
		{"out of order", 2, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := &memFile{}
			r := &gridftp.Receiver{Dst: writeOnly{dst}, Pool: gridftp.NewBufferPool(8 << 10), Hash: md5.New(), ReadBack: tc.back, Timeout: 10 * time.Second}
			if err := receive(t, r, deal(data, 10000, tc.streams, tc.reverse), nil); err != nil {
				t.Fatal(err)
			}
			sum, _, ok := r.Sum()
			if ok != tc.ok || ok && !bytes.Equal(sum, md5Of(data)) {
				t.Fatalf("Sum = %x, %v; want ok=%v", sum, ok, tc.ok)
			}
		})
	}
}

// TestReceiverLiveSumCorruptWrite: a storage layer that alters a byte on
// its way to the file. With ReadBack the live sum is that of what the file
// holds, so the comparison with the sender's sum fails, as it must. Without
// it, data hashed from the buffer (in order) is what the peer sent; data
// that came ahead of a gap is read back, so its corruption is caught either
// way.
func TestReceiverLiveSumCorruptWrite(t *testing.T) {
	data := randomData(t, 500000)
	const bs = 10000
	for _, tc := range []struct {
		name     string
		streams  int
		reverse  bool
		gap      bool // block 0 comes last, on its own stream
		back     bool
		at       int64
		sumsFile bool // the sum is the hash of the (corrupted) file; else of the data sent
	}{
		{"in order, read back", 1, false, false, true, 123456, true},
		{"out of order, read back", 3, true, false, true, 123456, true},
		{"in order, from the buffer", 1, false, false, false, 123456, false},
		{"ahead of a gap, from the buffer", 2, false, true, false, 3*bs + 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := &memFile{}
			r := &gridftp.Receiver{Dst: corrupting{dst, tc.at}, Pool: gridftp.NewBufferPool(8 << 10), Hash: md5.New(), ReadBack: tc.back, Timeout: 10 * time.Second}
			blocks, before := deal(data, bs, tc.streams, tc.reverse), func() {}
			if tc.gap {
				// The corrupted block lands while block 0 is still to
				// come: ahead of the gap.
				blocks, before = gapFirst(data, bs), waitRest(r, data, bs)
			}
			if err := receive(t, r, blocks, before); err != nil {
				t.Fatal(err)
			}
			file := dst.bytes()
			if bytes.Equal(file, data) {
				t.Fatal("nothing was corrupted")
			}
			sum, _, ok := r.Sum()
			want := md5Of(data)
			if tc.sumsFile {
				want = md5Of(file)
			}
			if !ok || !bytes.Equal(sum, want) {
				t.Fatalf("Sum = %x, %v; want %x (of the file: %v)", sum, ok, want, tc.sumsFile)
			}
		})
	}
}

// TestReceiverLiveSumRewrite: data written again over what was hashed
// leaves no live sum.
func TestReceiverLiveSumRewrite(t *testing.T) {
	data := randomData(t, 30000)
	blocks := deal(data, 10000, 1, false)
	blocks[0] = append(blocks[0], modeEBlock(5000, bytes.Repeat([]byte{'x'}, 100)))
	r := &gridftp.Receiver{Dst: &memFile{}, Pool: gridftp.NewBufferPool(8 << 10), Hash: md5.New(), Timeout: 10 * time.Second}
	if err := receive(t, r, blocks, nil); err != nil {
		t.Fatal(err)
	}
	if sum, _, ok := r.Sum(); ok {
		t.Fatalf("Sum = %x after a rewrite", sum)
	}
}

// BenchmarkReceiveLive receives 256 MiB per op over loopback into a file
// (in $FERRY_BENCH_DIR, default a temporary directory; /dev/shm keeps the
// disk out of it), with no live hash, with MD5 from the buffers and with
// MD5 of what is read back; cpu-s/GiB counts the whole process, the
// sending side of the loopback included.
func BenchmarkReceiveLive(b *testing.B) {
	const size = 256 << 20
	data := randomData(b, size)
	dir := os.Getenv("FERRY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		d, err := os.MkdirTemp(dir, "ferry-bench")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	for _, streams := range []int{1, 2} {
		for _, mode := range []string{"nohash", "md5-buffer", "md5-readback"} {
			b.Run(mode+"/streams="+string(rune('0'+streams)), func(b *testing.B) {
				f, err := os.Create(filepath.Join(dir, "f"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				pool := gridftp.NewBufferPool(1 << 20)
				blocks := deal(data, 1<<20, streams, false)
				b.SetBytes(size)
				var cpu atomic.Int64
				b.ResetTimer()
				for range b.N {
					r := &gridftp.Receiver{Dst: f, Pool: pool, Timeout: 30 * time.Second}
					if mode != "nohash" {
						r.Hash, r.ReadBack = md5.New(), mode == "md5-readback"
					}
					c0 := cpuTime()
					if err := receive(b, r, blocks, nil); err != nil {
						b.Fatal(err)
					}
					cpu.Add(int64(cpuTime() - c0))
					if r.Hash != nil {
						if _, _, ok := r.Sum(); !ok {
							b.Fatal("no live sum")
						}
					}
				}
				b.ReportMetric(time.Duration(cpu.Load()).Seconds()/float64(b.N)*float64(1<<30)/size, "cpu-s/GiB")
			})
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReceiverTransferBoundaries: the receiver keeps one transfer's data
// apart from the next one's when a pipelining sender's connections or
// EOFs run ahead (TestStripedPipelined in the server has the senders).
func TestReceiverTransferBoundaries(t *testing.T) {
	one, two := bytes.Repeat([]byte("one "), 5000), bytes.Repeat([]byte("TWO!"), 300)
	newReceiver := func(f *memFile) *gridftp.Receiver {
		return &gridftp.Receiver{Dst: f, Pool: gridftp.NewBufferPool(64 << 10), Timeout: 5 * time.Second}
	}
	t.Run("a second EOF with another count fails the transfer", func(t *testing.T) {
		streams, senders := loopbackStreams(t, 2)
		// Whichever EOF comes first, the other contradicts it before
		// the EODs can complete the count.
		senders[0].Write(append(modeEBlock(0, one), modeEEnd(true, 2)...))
		senders[1].Write(modeEEnd(true, 3))
		_, err := newReceiver(&memFile{}).Run(context.Background(), streams, nil, nil)
		if !errors.Is(err, gridftp.ErrDataStream) || !strings.Contains(err.Error(), "another transfer") {
			t.Fatalf("Run: %v, want a data stream error naming another transfer", err)
		}
	})
	t.Run("a cached stream the sender closed is dropped", func(t *testing.T) {
		streams, senders := loopbackStreams(t, 2)
		senders[1].Close()
		senders[0].Write(append(modeEBlock(0, one), modeEEnd(true, 1)...))
		f := &memFile{}
		left, err := newReceiver(f).Run(context.Background(), streams, nil, nil)
		if err != nil || !bytes.Equal(f.bytes(), one) || len(left) != 1 {
			t.Fatalf("Run: %v, %d bytes, %d streams left; want the file and one stream", err, len(f.bytes()), len(left))
		}
	})
	t.Run("a connection of the next transfer waits for it", func(t *testing.T) {
		// Whether the next connection arrives after the EOF count is
		// known is up to the scheduler: the run is repeated until it
		// does. Either way no byte of the second file may land in the
		// first.
		for try := 0; ; try++ {
			if try == 20 {
				t.Fatal("the next transfer's connection never came after the EOF count")
			}
			streams, senders := loopbackStreams(t, 2)
			extra, late := loopbackStreams(t, 1)
			accept := make(chan net.Conn, 1)
			senders[0].Write(append(modeEBlock(0, one[:10000]), modeEEnd(true, 2)...))
			go func() {
				time.Sleep(100 * time.Millisecond) // the EOF count is in
				late[0].Write(append(modeEBlock(0, two), modeEEnd(true, 1)...))
				accept <- extra[0].Conn
				time.Sleep(100 * time.Millisecond)
				senders[1].Write(append(modeEBlock(10000, one[10000:]), modeEEnd(false, 0)...))
				close(accept)
			}()
			first := &memFile{}
			left, err := newReceiver(first).Run(context.Background(), streams, accept, nil)
			if err != nil {
				if !strings.Contains(err.Error(), "another transfer") {
					t.Fatalf("first transfer: %v", err)
				}
				if bytes.Contains(first.bytes(), []byte("TWO!")) {
					t.Fatal("the second file's data is in the first file")
				}
				t.Logf("try %d: the next connection came before the EOF count: %v", try, err)
				continue
			}
			if !bytes.Equal(first.bytes(), one) || len(left) != 3 {
				t.Fatalf("first transfer: %d bytes (want %d), %d streams left (want 3)", len(first.bytes()), len(one), len(left))
			}
			// The second transfer gets the held connection's data; the
			// sender of the first closed its streams.
			senders[0].Close()
			senders[1].Close()
			second := &memFile{}
			if _, err := newReceiver(second).Run(context.Background(), left, nil, nil); err != nil || !bytes.Equal(second.bytes(), two) {
				t.Fatalf("second transfer: %v, %q", err, second.bytes())
			}
			return
		}
	})
}

// TestReceiverBlockInPieces: a block whose payload arrives in pieces, with
// pauses between them (a slow WAN stream), is read to its end: the reader
// waits for more than one segment at a time but never for more than the
// block still owes, whether it reads through buffers or splices into a
// file, and whatever its read-ahead already holds.
func TestReceiverBlockInPieces(t *testing.T) {
	data := randomData(t, 700<<10)
	pieces := []int{100 << 10, 70 << 10, 300 << 10, 1, 150<<10 - 1} // the first two blocks
	tests := []struct {
		name string
		dst  func(t *testing.T) (io.WriterAt, func() []byte)
	}{
		{"buffers", func(t *testing.T) (io.WriterAt, func() []byte) { f := &memFile{}; return f, f.bytes }},
		{"splice into a file", func(t *testing.T) (io.WriterAt, func() []byte) {
			p := filepath.Join(t.TempDir(), "f")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f, func() []byte { b, _ := os.ReadFile(p); return b }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst, content := tt.dst(t)
			// Two blocks of 310 KiB and 390 KiB on one stream, sent in the
			// pieces above with a pause after each.
			wire := append(modeEBlock(0, data[:310<<10]), modeEBlock(310<<10, data[310<<10:])...)
			streams, senders := loopbackStreams(t, 1)
			// A receive buffer as a long fat stream's grows to.
			streams[0].Conn.(*net.TCPConn).SetReadBuffer(4 << 20)
			go func() {
				at := 0
				for i, n := range pieces {
					if i == 0 {
						n += gridftp.HeaderLen
					}
					if at+n > 310<<10+gridftp.HeaderLen && at < 310<<10+gridftp.HeaderLen {
						n += gridftp.HeaderLen // the second block's header goes with the piece that crosses into it
					}
					senders[0].Write(wire[at : at+n])
					at += n
					time.Sleep(50 * time.Millisecond)
				}
				senders[0].Write(wire[at:])
				time.Sleep(50 * time.Millisecond)
				senders[0].Write(modeEEnd(true, 1))
			}()
			r := &gridftp.Receiver{Dst: dst, Pool: gridftp.NewBufferPool(1 << 20), Timeout: 2 * time.Second}
			if _, err := r.Run(context.Background(), streams, nil, nil); err != nil {
				t.Fatalf("receive: %v", err)
			}
			if !bytes.Equal(content(), data) {
				t.Fatal("the file is not the data sent")
			}
		})
	}
}

// errFull is a destination's failure in TestReceiverDrainsAfterDstFails.
var errFull = errors.New("full")

// fullAfter takes n bytes and then fails every write with errFull.
type fullAfter struct {
	mu sync.Mutex
	n  int64
}

func (f *fullAfter) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int64(len(p)) > f.n {
		return 0, errFull
	}
	f.n -= int64(len(p))
	return len(p), nil
}

// roAfter writes to w through WriteAt, but offers ro, which takes no
// writes, to splice into past at: only a splice fails.
type roAfter struct {
	w, ro *os.File
	at    int64
}

func (f roAfter) WriteAt(p []byte, off int64) (int, error) { return f.w.WriteAt(p, off) }

func (f roAfter) FileAt(off, n int64) (*os.File, error) {
	if off+n > f.at {
		return f.ro, nil
	}
	return f.w, nil
}

// TestReceiverDrainsAfterDstFails: with Drain, a receiver whose Dst fails
// reads every stream on up to its EOD, dropping the payload, and then
// returns Dst's error, with each stream in step: what its sender sends
// after the EOD is what comes next. Through buffers, and by splice into a
// file that takes no writes (what the splice took from the stream but
// could not write counts as read).
func TestReceiverDrainsAfterDstFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, tc := range []struct {
		name string
		dst  io.WriterAt
		want error
	}{
		{"write", &fullAfter{n: 1 << 20}, errFull},
		{"splice", roAfter{w: w, ro: ro, at: 1 << 20}, syscall.EBADF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const trailer = "next"
			data := randomData(t, 3<<20)
			blocks := deal(data, 256<<10, 2, true)
			streams, senders := loopbackStreams(t, len(blocks))
			var wg sync.WaitGroup
			for i, c := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, b := range blocks[i] {
						c.Write(b)
					}
					c.Write(modeEEnd(i == len(senders)-1, len(senders)))
					c.Write([]byte(trailer))
				}()
			}
			r := &gridftp.Receiver{Dst: tc.dst, Pool: gridftp.NewBufferPool(64 << 10), Drain: time.Minute}
			kept, err := r.Run(context.Background(), streams, nil, nil)
			wg.Wait()
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run: %v, want %v", err, tc.want)
			}
			if len(kept) != len(streams) {
				t.Fatalf("%d streams kept, want %d", len(kept), len(streams))
			}
			for i, s := range kept {
				s.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				got := make([]byte, len(trailer))
				if _, err := io.ReadFull(s.R, got); err != nil || string(got) != trailer {
					t.Errorf("stream %d after the drain: %q, %v; want %q", i, got, err, trailer)
				}
			}
		})
	}
}
