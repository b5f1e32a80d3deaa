package client_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/storage"
)

// countingFS counts files opened for reading: a CKSM answered from a live
// checksum opens none.
type countingFS struct {
	storage.Driver
	opens atomic.Int64
}

func (c *countingFS) Open(ctx context.Context, name string) (storage.File, error) {
	c.opens.Add(1)
	return c.Driver.Open(ctx, name)
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// TestLiveChecksums: after OPTS CKSM Live, a CKSM of exactly what a
// transfer moved comes from the hash computed on the way, on the receiving
// and on the sending side; a change to the file through the server makes
// CKSM read the file again.
func TestLiveChecksums(t *testing.T) {
	ctx := context.Background()
	root, p := servertest.Root(t)
	fs := &countingFS{Driver: p}
	c := dial(t, servertest.Serve(t, &server.Server{FS: fs, Anonymous: true, DataTimeout: 10 * time.Second}), 1)
	if _, ok := c.Feature("CKSMLIVE"); !ok {
		t.Fatal("FEAT lacks CKSMLIVE")
	}
	if _, err := c.Do(ctx, "OPTS CKSM Live=MD5;"); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(t, 3<<20+5)
	if _, err := c.Put(ctx, "/f", bytes.NewReader(data), 0, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// ESTO of a section, then that section's checksum.
	if _, err := c.Put(ctx, "/f", bytes.NewReader(data[1<<20:2<<20]), 1<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	before := fs.opens.Load()
	for _, tc := range []struct {
		off, n int64
		want   string
	}{
		{1 << 20, 1 << 20, md5hex(data[1<<20 : 2<<20])},
	} {
		got, err := c.Checksum(ctx, "MD5", "/f", tc.off, tc.n)
		if err != nil || got != tc.want {
			t.Fatalf("CKSM %d+%d = %s, %v; want %s", tc.off, tc.n, got, err, tc.want)
		}
	}
	if fs.opens.Load() != before {
		t.Error("CKSM of a section just received read the file")
	}
	// The whole file was overwritten in part by the ESTO: its first live
	// sum is gone, so CKSM reads the file, and is right.
	got, err := c.Checksum(ctx, "MD5", "/f", 0, -1)
	if err != nil || got != md5hex(data) || fs.opens.Load() == before {
		t.Fatalf("whole-file CKSM after an ESTO = %s, %v (opens %d→%d); want %s from the file", got, err, before, fs.opens.Load(), md5hex(data))
	}
	// Sending side: RETR with one stream hashes what it reads.
	out := &buffer{b: make([]byte, len(data))}
	if _, err := c.Get(ctx, "/f", out, 0, -1); err != nil {
		t.Fatal(err)
	}
	before = fs.opens.Load()
	if got, _ := c.Checksum(ctx, "MD5", "/f", 0, -1); got != md5hex(data) || fs.opens.Load() != before {
		t.Errorf("CKSM after RETR = %s (opens %d→%d); want %s from the live sum", got, before, fs.opens.Load(), md5hex(data))
	}
	// A change made outside a transfer (SITE TRNC, DELE) is not hidden.
	if _, err := c.Do(ctx, "SITE TRNC 10 /f"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Checksum(ctx, "MD5", "/f", 0, -1); got != md5hex(data[:10]) {
		t.Errorf("CKSM after SITE TRNC = %s, want %s", got, md5hex(data[:10]))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "f")); len(b) != 10 {
		t.Fatalf("file is %d bytes", len(b))
	}
	if _, err := c.Do(ctx, "OPTS CKSM Live=BOGUS;"); err == nil {
		t.Error("OPTS CKSM Live with an unknown algorithm was accepted")
	}
}
