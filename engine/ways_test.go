package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// When the copy is due to spread, the first server's writes wait
	// until the second server has a login, so that the copy cannot end
	// before the second server is used, however loaded the machine (a
	// copy that never logs in there fails after waitLogin).
	var gate loginGate
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { return gatedWrites{d, &gate} })
	other := startEndpoint(t, dst.root, nil) // a second server of the same storage
	gate.log = &other.cmds
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
			gate.armed.Store(tc.servers == 2)
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

// loginGate holds writes back, while armed, until log has seen a login.
type loginGate struct {
	armed atomic.Bool
	log   *commandLog
}

// waitLogin bounds the wait: the copy is taken to have not spread.
const waitLogin = 30 * time.Second

func (g *loginGate) wait() {
	for end := time.Now().Add(waitLogin); g.armed.Load() && g.log.count("PASS") == 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
}

// gatedWrites is a driver whose files' writes wait for the gate.
type gatedWrites struct {
	storage.Driver
	gate *loginGate
}

func (s gatedWrites) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := s.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return gatedFile{f, s.gate}, nil
}

type gatedFile struct {
	storage.File
	gate *loginGate
}

func (f gatedFile) WriteAt(p []byte, off int64) (int, error) {
	f.gate.wait()
	return f.File.WriteAt(p, off)
}
