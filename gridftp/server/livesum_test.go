package server_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"ferry/gridftp/server"
	"ferry/storage"
)

// liveFS counts files opened for reading (a CKSM answered from a live sum
// opens none) and, when corruptAt >= 0, flips the byte at that offset in
// the write that covers it, as a faulty storage layer would.
type liveFS struct {
	storage.Driver
	opens     atomic.Int64
	corruptAt int64
}

func (l *liveFS) Open(ctx context.Context, name string) (storage.File, error) {
	l.opens.Add(1)
	return l.Driver.Open(ctx, name)
}

func (l *liveFS) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := l.Driver.Create(ctx, name, flag)
	if err != nil || l.corruptAt < 0 {
		return f, err
	}
	return &corruptFile{File: f, at: l.corruptAt}, nil
}

type corruptFile struct {
	storage.File
	at int64
}

func (f *corruptFile) WriteAt(p []byte, off int64) (int, error) {
	if off <= f.at && f.at < off+int64(len(p)) {
		q := bytes.Clone(p)
		q[f.at-off] ^= 0xff
		p = q
	}
	return f.File.WriteAt(p, off)
}

func startLive(t *testing.T, corruptAt int64) (*testEnv, *liveFS) {
	var fs *liveFS
	env := startServer(t, func(s *server.Server) {
		fs = &liveFS{Driver: s.FS, corruptAt: corruptAt}
		s.FS = fs
		s.BlockSize = 8 << 10
	})
	return env, fs
}

// liveSession logs in with MODE E and live MD5 and returns the passive
// data address.
func liveSession(env *testEnv) (*ctl, string) {
	c := env.login()
	c.expect("MODE E", 200)
	c.expect("OPTS CKSM Live=MD5;", 200)
	return c, c.pasv()
}

// inOrder is data as MODE E blocks of bs bytes, in order.
func inOrder(data []byte, bs int) []byte {
	var out []byte
	for off := 0; off < len(data); off += bs {
		out = append(out, block(uint64(off), data[off:min(off+bs, len(data))])...)
	}
	return out
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// notLive expects CKSM of a range to fail, after reading the file.
func notLive(t *testing.T, c *ctl, fs *liveFS, off, n int64, path string) {
	t.Helper()
	before := fs.opens.Load()
	c.send(fmt.Sprintf("CKSM MD5 %d %d %s", off, n, path))
	if r := c.read(); r.Code == 213 || fs.opens.Load() == before {
		t.Errorf("CKSM MD5 %d %d %s: %q, read the file: %v; want an error from the file", off, n, path, r.String(), fs.opens.Load() != before)
	}
}

// cksm expects CKSM of a range to be want, and from memory or not.
func cksm(t *testing.T, c *ctl, fs *liveFS, off, n int64, path, want string, live bool) {
	t.Helper()
	before := fs.opens.Load()
	c.expectText(fmt.Sprintf("CKSM MD5 %d %d %s", off, n, path), "213 "+want)
	if got := fs.opens.Load() != before; got == live {
		t.Errorf("CKSM MD5 %d %d %s read the file: %v, want %v", off, n, path, got, !live)
	}
}

// TestLiveSumChunks: the engine's chunks of one file land concurrently,
// and a chunk is checked while a later one is still arriving. Starting an
// ESTO forgets the sums from its offset on, not those of the chunks before.
func TestLiveSumChunks(t *testing.T) {
	env, fs := startLive(t, -1)
	const chunk = 100000
	data := pattern(3*chunk - 7)
	a, addrA := liveSession(env)
	b, addrB := liveSession(env)
	da, db := dialData(t, addrA), dialData(t, addrB)
	check := env.login()

	a.expect("ESTO A 0 big", 150)
	send(t, da, block(0, data[:chunk/2]), block(chunk/2, data[chunk/2:chunk]), eof(1))
	if _, final := a.final(); final.Code != 226 {
		t.Fatalf("ESTO of chunk 0: %q", final.String())
	}
	// Chunk 1 begins (150: its ESTO has opened the file) before chunk 0 is
	// checked.
	b.expect("ESTO A 100000 big", 150)
	cksm(t, check, fs, 0, chunk, "big", md5hex(data[:chunk]), true)
	send(t, db, block(chunk/2, data[chunk+chunk/2:2*chunk]), block(0, data[chunk:chunk+chunk/2]), eof(1))
	if _, final := b.final(); final.Code != 226 {
		t.Fatalf("ESTO of chunk 1: %q", final.String())
	}
	a.expect("ESTO A 200000 big", 125)
	send(t, da, block(0, data[2*chunk:]), eof(1))
	if _, final := a.final(); final.Code != 226 {
		t.Fatalf("ESTO of chunk 2: %q", final.String())
	}
	cksm(t, check, fs, chunk, chunk, "big", md5hex(data[chunk:2*chunk]), true)
	cksm(t, check, fs, 2*chunk, chunk-7, "big", md5hex(data[2*chunk:]), true)
	cksm(t, check, fs, 0, -1, "big", md5hex(data), false)

	// SITE TRNC forgets from the cut on: chunk 0 stays, chunk 1 is gone.
	check.expect(fmt.Sprintf("SITE TRNC %d big", chunk+10), 200)
	cksm(t, check, fs, 0, chunk, "big", md5hex(data[:chunk]), true)
	notLive(t, check, fs, chunk, chunk, "big")
	check.expect("SITE TRNC 0 big", 200)
	notLive(t, check, fs, 0, chunk, "big")
}

// TestLiveSumParallelStreams: blocks out of order over several streams
// still give a live sum, of the data in file order.
func TestLiveSumParallelStreams(t *testing.T) {
	env, fs := startLive(t, -1)
	c, addr := liveSession(env)
	data := pattern(50000 + 123)
	c.expect("STOR f", 150)
	conns := []net.Conn{dialData(t, addr), dialData(t, addr), dialData(t, addr)}
	for i, p := range spread(data, 1000, 3) {
		send(t, conns[i], p)
	}
	finishStreams(t, conns)
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(env.content("f"), data) {
		t.Fatalf("STOR: %q", final.String())
	}
	cksm(t, c, fs, 0, -1, "f", md5hex(data), true)
}

// TestLiveSumCorruptWrite: the receiver's live sum is that of what the
// file holds, so a storage layer that alters data on its way to the file
// is caught: CKSM answers the file's sum, not the sender's.
func TestLiveSumCorruptWrite(t *testing.T) {
	const at = 12345
	env, fs := startLive(t, at)
	data := pattern(40000)
	for _, streams := range []int{1, 3} {
		t.Run(fmt.Sprint(streams, " streams"), func(t *testing.T) {
			c, addr := liveSession(env)
			c.expect("STOR f", 150)
			var conns []net.Conn
			for range streams {
				conns = append(conns, dialData(t, addr))
			}
			if streams == 1 {
				send(t, conns[0], inOrder(data, 1000))
			} else {
				for i, p := range spread(data, 1000, streams) {
					send(t, conns[i], p)
				}
			}
			finishStreams(t, conns)
			if _, final := c.final(); final.Code != 226 {
				t.Fatalf("STOR: %q", final.String())
			}
			file := env.content("f")
			if bytes.Equal(file, data) || len(file) != len(data) {
				t.Fatal("the write was not corrupted")
			}
			cksm(t, c, fs, 0, -1, "f", md5hex(file), true)
		})
	}
}

// TestLiveSumSendParallel: a sender's live sum holds with several streams
// (OPTS RETR Parallelism), whole files and ranges (ERET): the streams take
// blocks in file order, so the sum covers the range in order and CKSM
// answers it from memory.
func TestLiveSumSendParallel(t *testing.T) {
	env, fs := startLive(t, -1)
	data := pattern(300000 + 17)
	tests := []struct {
		name    string
		streams int
		cmd     string
		off, n  int64
	}{
		{"RETR, 1 stream", 1, "RETR a", 0, -1},
		{"RETR, 4 streams", 4, "RETR b", 0, -1},
		{"ERET, 3 streams", 3, "ERET P 100000 150000 c", 100000, 150000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.cmd[len(tt.cmd)-1:] // a file of its own: no sum from an earlier case
			env.file(name, data)
			c, _ := liveSession(env)
			c.expect(fmt.Sprintf("OPTS RETR Parallelism=%d,%d,%d;", tt.streams, tt.streams, tt.streams), 200)
			a := c.port()
			c.send(tt.cmd)
			var recs []received
			for range tt.streams {
				dc := a.accept()
				rec, err := readModeE(dc)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec)
			}
			if _, final := c.final(); final.Code != 226 {
				t.Fatalf("%s: %q", tt.cmd, final.String())
			}
			want := data
			if tt.n >= 0 {
				want = data[tt.off : tt.off+tt.n]
			}
			if got := assemble(t, len(want), recs...); !bytes.Equal(got, want) {
				t.Fatal("the blocks do not make the range")
			}
			cksm(t, c, fs, tt.off, tt.n, name, md5hex(want), true)
		})
	}
}
