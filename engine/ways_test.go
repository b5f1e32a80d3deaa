package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/engine"
	"ferry/storage"
)

// wayRecorder is a recorder that keeps what the copy says of its ways.
type wayRecorder struct {
	recorder
	mu    sync.Mutex
	notes []string
}

func (r *wayRecorder) Way(w engine.Way, note string) {
	r.mu.Lock()
	r.notes = append(r.notes, w.String()+": "+note)
	r.mu.Unlock()
}

// TestWays: a large file goes over the servers of an endpoint that lists
// several (its chunks on sessions to each), or plain when the endpoint
// has one server or the file is small; ferry's servers offer one stripe
// (SPAS), so nothing is striped; the copy says which way it took.
func TestWays(t *testing.T) {
	src := startEndpoint(t, "", nil)
	// The first server writes slowly, so that its session still holds a
	// chunk when the second server's has logged in, however loaded the
	// machine: the copy cannot end before the second server is used.
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { return slowWrites{d} })
	other := startEndpoint(t, dst.root, nil) // a second server of the same storage
	spread := dst.Endpoint
	spread.Servers = []string{other.Addr}
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		dst     engine.Endpoint
		size    int
		way     engine.Way
		note    string // in what Ways heard; "" for nothing
		spas    int    // SPAS at the destination
		servers int    // destination servers that received chunks (ESTO)
	}{
		{"spread over two servers", spread, 24 * mib, engine.WaySpread, "spread for files of 16 MiB or more: servers: 1 at the source, 2 at the destination", 1, 2},
		{"one server", dst.Endpoint, 24 * mib, engine.WayPlain, "", 1, 0},
		{"small file", spread, 4 * mib, engine.WayPlain, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := random(tc.size)
			writeFile(t, filepath.Join(src.root, "f"), data)
			for _, e := range []*endpoint{src, dst, other} {
				e.cmds.take()
			}
			rep := &wayRecorder{}
			opts := fastOptions()
			opts.StripeSize, opts.Verify = 16*mib, true
			res, err := engine.Copy(context.Background(), src.Endpoint, tc.dst, []engine.Item{{Src: "/f", Dst: "/g"}}, opts, rep)
			if err != nil || res.Transferred != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			compareFile(t, filepath.Join(dst.root, "g"), data)
			if res.Settings.Way != tc.way {
				t.Errorf("way %s, want %s", res.Settings.Way, tc.way)
			}
			if got := strings.Join(rep.notes, "\n"); tc.note == "" && got != "" || !strings.Contains(got, tc.note) {
				t.Errorf("Ways heard %q, want %q", got, tc.note)
			}
			d, o := dst.cmds.take(), other.cmds.take()
			if d["SPAS"] != tc.spas {
				t.Errorf("%d SPAS at the destination, want %d", d["SPAS"], tc.spas)
			}
			// Sessions take chunks from one queue, so which server writes
			// how many depends on which session is ready first; what
			// spreading decides is that the second server gets sessions.
			spreadTo := o["PASS"] + o["ESTO"]
			switch {
			case tc.servers == 2 && spreadTo == 0:
				t.Errorf("no session for chunks at the second server (ESTO %d, %d)", d["ESTO"], o["ESTO"])
			case tc.servers == 0 && d["ESTO"]+o["ESTO"] > 0:
				t.Errorf("chunks (ESTO %d, %d) where no spreading was due", d["ESTO"], o["ESTO"])
			}
		})
	}
}

// compareFile fails unless the file at p holds data.
func compareFile(t *testing.T, p string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s differs from its source (%v)", p, err)
	}
}

// slowWrites is a driver whose files take 40 ms per write: the second
// server's session must log in, however loaded the machine, while the
// first still writes (24 MiB is about a second of it; 10 ms was once too
// short while the whole suite ran).
type slowWrites struct{ storage.Driver }

func (s slowWrites) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := s.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return slowFile{f}, nil
}

type slowFile struct{ storage.File }

func (f slowFile) WriteAt(p []byte, off int64) (int, error) {
	time.Sleep(40 * time.Millisecond)
	return f.File.WriteAt(p, off)
}
