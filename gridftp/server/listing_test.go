package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/storage"
)

// heldLister is a tree whose listings are counted and, past the half of
// a directory's entries, held until the client has received one: a
// server that makes the whole listing before it sends any waits forever.
type heldLister struct {
	storage.Driver
	half     int
	readDirs atomic.Int32
	received chan struct{} // closed by the client
}

func (h *heldLister) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	h.readDirs.Add(1)
	return h.Driver.ReadDir(ctx, name)
}

func (h *heldLister) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	n := 0
	return storage.ListDir(ctx, h.Driver, name, func(in storage.Info) error {
		if n++; n == h.half {
			select {
			case <-h.received:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return fn(in)
	})
}

// TestListingStreams: the server writes a directory's listing as the
// storage lists it, never reading it whole (ReadDir), and every entry of
// a directory of 30,000 reaches the client exactly once, by MLSD in MODE
// E through ferry's client and by NLST and LIST in stream mode.
func TestListingStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 files")
	}
	const many = 30000
	held := &heldLister{half: many / 2, received: make(chan struct{})}
	env := startServer(t, func(s *server.Server) {
		held.Driver = s.FS
		s.FS = held
		s.DataTimeout = time.Minute
		s.BlockSize = 64 << 10 // MODE E sends full blocks: several before the hold
	})
	dir := filepath.Join(env.root, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i := range many {
		name := fmt.Sprintf("file-%05d", i)
		want[name] = true
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// Generous: a deadlock guard, not a measure.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	var once sync.Once
	err = c.ListEach(ctx, "/big", func(e gridftp.Entry) error {
		once.Do(func() { close(held.received) })
		if e.Type == "file" {
			got[e.Name]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("MLSD: %v", err)
	}
	if n := held.readDirs.Load(); n != 0 {
		t.Errorf("the server read the directory whole %d times (ReadDir) for a listing", n)
	}
	checkOnce(t, "MLSD", got, want)

	ctl := env.login()
	for _, cmd := range []string{"NLST /big", "LIST /big"} {
		_, final, data := tryRetr(t, ctl, cmd)
		if final.Code != gridftp.CodeTransferComplete {
			t.Fatalf("%s: %q", cmd, final.String())
		}
		got := map[string]int{}
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\r\n"), "\r\n") {
			got[line[strings.LastIndexByte(line, ' ')+1:]]++
		}
		checkOnce(t, cmd, got, want)
	}
}

// checkOnce checks that got counts each name of want once, and no other.
func checkOnce(t *testing.T, what string, got map[string]int, want map[string]bool) {
	t.Helper()
	for name, n := range got {
		if n != 1 || !want[name] {
			t.Errorf("%s: %q listed %d times", what, name, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d names listed, want %d", what, len(got), len(want))
	}
}
