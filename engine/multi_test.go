package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/multicast"
	"ferry/internal/partname"
	"ferry/stack"
	"ferry/stack/forward"
	"ferry/storage"
)

// forwarder runs a ferry endpoint that offers the multicast layer, as
// ferry gridftp --multicast does.
func forwarder(t *testing.T, wrap func(storage.Driver) storage.Driver) *endpoint {
	t.Helper()
	e := startEndpoint(t, "", wrap)
	reg := stack.Kinds()
	maps.Copy(reg, forward.Kinds())
	e.srv.Layers = reg
	return e
}

// multiTree is a source tree with a large file, small ones, depth and an
// empty directory.
func multiTree(t *testing.T, root string) {
	t.Helper()
	writeFile(t, filepath.Join(root, "set", "big.bin"), random(9<<20+123))
	for i := range 12 {
		writeFile(t, filepath.Join(root, "set", "d", fmt.Sprintf("f%02d", i)), random(i*4099))
	}
	writeFile(t, filepath.Join(root, "set", "a", "b", "c", "deep"), random(777))
	os.MkdirAll(filepath.Join(root, "set", "empty"), 0o755)
}

func targets(dsts []*endpoint, dst string) []engine.Target {
	out := make([]engine.Target, len(dsts))
	for i, d := range dsts {
		out[i] = engine.Target{Endpoint: d.Endpoint, Items: []engine.Item{{Src: "/set", Dst: dst, Recursive: true}}}
	}
	return out
}

// destRecorder records DestDone as well.
type destRecorder struct {
	recorder
	mu   sync.Mutex
	dest map[int]int // DestDone calls by destination
}

func (r *destRecorder) DestDone(i int, _ engine.FileResult) {
	r.mu.Lock()
	if r.dest == nil {
		r.dest = map[int]int{}
	}
	r.dest[i]++
	r.mu.Unlock()
}

func TestCopyManyTree(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	for _, tc := range []struct {
		n, fanout, p int
	}{{2, 0, 0}, {4, 1, 1}, {4, 2, 4}, {8, 2, 1}, {8, 4, 4}} {
		t.Run(fmt.Sprintf("dests=%d,fanout=%d,p=%d", tc.n, tc.fanout, tc.p), func(t *testing.T) {
			var dsts []*endpoint
			for range tc.n {
				dsts = append(dsts, forwarder(t, nil))
			}
			o := fastOptions()
			o.Verify, o.Fanout, o.Parallelism = true, tc.fanout, tc.p
			rep := &destRecorder{}
			res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, rep)
			if err != nil {
				t.Fatal(err)
			}
			if res.Head < 0 || (tc.fanout > 0 && (res.Fanout != tc.fanout || res.FanoutSmall != tc.fanout)) {
				t.Errorf("head %d fan-out %d: want a tree at fan-out %d", res.Head, res.Fanout, tc.fanout)
			}
			if res.Files != 14 || res.Transferred != 14 || res.Failed != 0 {
				t.Fatalf("%+v", res.Result)
			}
			for i, d := range dsts {
				compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
				if r := res.Dests[i]; r.Delivered != 14 || r.Repaired != 0 || r.Failed != 0 || rep.dest[i] != 14 {
					t.Errorf("destination %d: %+v, %d reports", i, r, rep.dest[i])
				}
			}
			// The source sent each file once: to the head.
			if got := src.cmds.take()["RETR"]; got != 14 {
				t.Errorf("source served %d RETR, want 14 (one per file)", got)
			}
		})
	}
}

// TestCopyManyMixed: a server that cannot forward is a leaf of the tree
// or, where the tree would need it to forward, gets its copy afterwards.
func TestCopyManyMixed(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	dsts := []*endpoint{startEndpoint(t, "", nil), forwarder(t, nil), startEndpoint(t, "", nil), forwarder(t, nil)}
	o := fastOptions()
	o.Verify = true
	res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
	if err != nil || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Head != 1 && res.Head != 3 {
		t.Errorf("head %d: want a server that forwards", res.Head)
	}
	for _, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
	}
}

// TestCopyManyNoForwarder: with no server that forwards, each
// destination gets an ordinary copy.
func TestCopyManyNoForwarder(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	dsts := []*endpoint{startEndpoint(t, "", nil), startEndpoint(t, "", nil), startEndpoint(t, "", nil)}
	res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), fastOptions(), nil)
	if err != nil || res.Failed != 0 || res.Head != -1 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
	}
}

// refusing fails the first creation of each named file.
type refusing struct {
	storage.Driver
	names []string
	seen  sync.Map
	hits  atomic.Int32
}

func (r *refusing) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	for _, n := range r.names {
		if strings.HasSuffix(name, n) {
			if _, again := r.seen.LoadOrStore(name, true); !again {
				r.hits.Add(1)
				return nil, fmt.Errorf("refused by the test: %w", storage.ErrPermission)
			}
		}
	}
	return r.Driver.Create(ctx, name, flag)
}

// TestCopyManyRepair: a destination the tree did not reach with some
// files gets them from the head's verified copy, and the tree stops
// sending to it.
func TestCopyManyRepair(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	bad := &refusing{names: []string{partname.For("/d/f03")}} // the tree's copies go under temporary names
	dsts := []*endpoint{forwarder(t, nil), forwarder(t, func(d storage.Driver) storage.Driver { bad.Driver = d; return bad }), forwarder(t, nil)}
	o := fastOptions()
	o.Verify, o.Fanout = true, 1
	res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
	if err != nil || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if bad.hits.Load() != 1 {
		t.Fatalf("the refusal hit %d times", bad.hits.Load())
	}
	for _, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
	}
	repaired := 0
	for _, d := range res.Dests {
		repaired += d.Repaired
	}
	if repaired == 0 {
		t.Errorf("nothing repaired: %+v", res.Dests)
	}
}

// TestCopyManyUnreachable: a destination nobody can reach fails alone,
// named, and the others complete.
func TestCopyManyUnreachable(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := ln.Addr().String()
	ln.Close()
	a, b := forwarder(t, nil), forwarder(t, nil)
	ts := targets([]*endpoint{a, b}, "/copy")
	ts = append(ts[:1], engine.Target{Endpoint: engine.Endpoint{Addr: gone}, Items: ts[0].Items}, ts[1])
	o := fastOptions()
	o.Fanout, o.MaxAttempts = 1, 2
	res, err := engine.CopyMany(context.Background(), src.Endpoint, ts, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Dests[1].Delivered != 0 || res.Dests[1].Err == nil && res.Dests[1].Failed == 0 {
		t.Errorf("unreachable destination: %+v", res.Dests[1])
	}
	for _, d := range []*endpoint{a, b} {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
	}
	if res.Failed != res.Files || res.Files != 14 {
		t.Errorf("%d of %d files failed: want all (none reached every destination)", res.Failed, res.Files)
	}
}

// TestCopyManyRefusesSource: a destination that is the source, or two
// destinations that are one place, are refused before anything moves.
func TestCopyManyRefusesSource(t *testing.T) {
	src := forwarder(t, nil)
	multiTree(t, src.root)
	other := forwarder(t, nil)
	before, _ := os.ReadFile(filepath.Join(src.root, "set", "big.bin"))
	for _, tc := range []struct {
		name string
		ts   []engine.Target
	}{
		{"source", append(targets([]*endpoint{other}, "/copy"), targets([]*endpoint{src}, "/set")...)},
		{"inside source", append(targets([]*endpoint{other}, "/copy"), targets([]*endpoint{src}, "/set/d")...)},
		{"twice", targets([]*endpoint{other, other}, "/copy")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := engine.CopyMany(context.Background(), src.Endpoint, tc.ts, fastOptions(), nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if after, _ := os.ReadFile(filepath.Join(src.root, "set", "big.bin")); !bytes.Equal(before, after) {
		t.Fatal("source changed")
	}
	if _, err := os.Stat(filepath.Join(other.root, "copy")); err == nil {
		t.Fatal("something was copied")
	}
}

// arrivals records Arrived as well.
type arrivals struct {
	destRecorder
	amu sync.Mutex
	got map[int][]string // sources by destination
}

func (a *arrivals) Arrived(i int, r engine.FileResult) {
	a.amu.Lock()
	if a.got == nil {
		a.got = map[int][]string{}
	}
	a.got[i] = append(a.got[i], r.Src)
	a.amu.Unlock()
}

// TestCopyManyHas: a resumed copy (Target.Has) sends no destination what
// it has from the earlier run, the head included, and reports what
// arrives where as it arrives.
func TestCopyManyHas(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	dsts := []*endpoint{forwarder(t, nil), forwarder(t, nil), forwarder(t, nil)}
	o := fastOptions()
	o.Verify, o.Fanout = true, 1
	if _, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil); err != nil {
		t.Fatal(err)
	}
	lacks := []map[string]bool{{}, {"/set/d/f02": true}, {"/set/d/f03": true, "/set/big.bin": true}}
	ts := targets(dsts, "/copy")
	for i, d := range dsts {
		for p := range lacks[i] {
			os.Remove(filepath.Join(d.root, "copy", strings.TrimPrefix(p, "/set/")))
		}
		// Has is asked about directories too: it knows files only.
		dirs := map[string]bool{"/set/d": true, "/set/a": true, "/set/a/b": true, "/set/a/b/c": true, "/set/empty": true}
		ts[i].Has = func(s string) bool { return !dirs[s] && !lacks[i][s] }
		d.cmds.take()
	}
	rep := &arrivals{}
	res, err := engine.CopyMany(context.Background(), src.Endpoint, ts, o, rep)
	if err != nil || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	for i, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
		c := d.cmds.take()
		if stored := c["STOR"] + c["ESTO"]; (stored == 0) != (len(lacks[i]) == 0) {
			t.Errorf("destination %d lacked %d files and stored %d", i, len(lacks[i]), stored)
		}
		got := map[string]bool{}
		for _, s := range rep.got[i] {
			got[s] = true
		}
		if !maps.Equal(got, lacks[i]) {
			t.Errorf("destination %d: arrived %v, want %v", i, got, lacks[i])
		}
		if r := res.Dests[i]; r.Delivered != len(lacks[i]) || r.Failed != 0 {
			t.Errorf("destination %d: %+v", i, r)
		}
	}
}

// TestCopyManyOneFile: a single file goes through the tree once, and no
// destination is sent it again by the repair pass.
func TestCopyManyOneFile(t *testing.T) {
	src := startEndpoint(t, "", nil)
	data := random(3<<20 + 7)
	writeFile(t, filepath.Join(src.root, "one.bin"), data)
	dsts := []*endpoint{forwarder(t, nil), forwarder(t, nil), forwarder(t, nil)}
	var ts []engine.Target
	for _, d := range dsts {
		ts = append(ts, engine.Target{Endpoint: d.Endpoint, Items: []engine.Item{{Src: "/one.bin", Dst: "/got.bin"}}})
	}
	res, err := engine.CopyMany(context.Background(), src.Endpoint, ts, fastOptions(), nil)
	if err != nil || res.Transferred != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	for i, d := range dsts {
		if got, _ := os.ReadFile(filepath.Join(d.root, "got.bin")); !bytes.Equal(got, data) {
			t.Errorf("destination %d: wrong copy", i)
		}
		if r := res.Dests[i]; r.Delivered != 1 || r.Repaired != 0 {
			t.Errorf("destination %d: %+v", i, r)
		}
	}
	if got := src.cmds.take()["RETR"]; got != 1 {
		t.Errorf("source served %d RETR, want 1", got)
	}
}

// TestCopyManyPollutedHop: a hop inside the tree gets a wrong stream (a
// byte of the large file flipped on its way in) and forwards it: its
// parent finds its copy wrong and names it, but the hop checked its own
// child against what it received and found it right. The engine takes
// that child's copy for suspect too and checks it against the head's:
// every destination ends identical to the source.
func TestCopyManyPollutedHop(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	var flipped atomic.Bool
	head := forwarder(t, nil)
	// The polluting hop answers late: the head is the nearest
	// forwarder, so it is not the head; with a fan-out of 1 it is the
	// middle of the chain head → hop → leaf.
	hop := startEndpointLn(t, "", nil, func(ln net.Listener) net.Listener { return slowUSER{ln} })
	reg := stack.Kinds()
	polluting := stack.Kind{Filter: func(e stack.Entry, env stack.Env) (stack.Filter, error) {
		f, err := forward.Kinds()[multicast.Name].Filter(e, env)
		return polluter{Filter: f, flipped: &flipped}, err
	}}
	reg[multicast.Name], reg[multicast.Alias] = polluting, polluting
	hop.srv.Layers = reg
	leaf := startEndpoint(t, "", nil)
	o := fastOptions()
	o.Verify, o.Fanout = true, 1
	dsts := []*endpoint{head, hop, leaf}
	res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
	if err != nil || res.Failed != 0 || res.Head != 0 {
		t.Fatalf("head %d, %+v, %v", res.Head, res.Result, err)
	}
	if !flipped.Load() {
		t.Fatal("the hop's stream was never polluted: the test did not test")
	}
	for i, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
		t.Logf("destination %d: %+v", i, res.Dests[i])
	}
	if res.Dests[2].Repaired == 0 {
		t.Errorf("the leaf's polluted copy was not repaired: %+v", res.Dests[2])
	}
}

// slowUSER is a listener whose connections answer 20 ms late, as over a
// longer link: the banner and USER (a round trip is the least of the
// samples a connection takes, so a late USER alone would not make it far).
type slowUSER struct{ net.Listener }

func (l slowUSER) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return slowUSERConn{c}, err
}

type slowUSERConn struct{ net.Conn }

func (c slowUSERConn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("220")) || bytes.HasPrefix(p, []byte("331")) {
		time.Sleep(20 * time.Millisecond)
	}
	return c.Conn.Write(p)
}

// polluter is the multicast layer with a byte of big.bin flipped, once,
// before the layer sees it: the stream a hop receives is wrong.
type polluter struct {
	stack.Filter
	flipped *atomic.Bool
}

func (p polluter) DeferSink(ctx context.Context, t *stack.Transfer, open func() (stack.Sink, error)) (stack.Sink, error) {
	s, err := p.Filter.(stack.Deferrer).DeferSink(ctx, t, open)
	if err != nil || !strings.HasSuffix(t.Name, partname.For("/big.bin")) {
		return s, err
	}
	return &flipSink{Sink: s, flipped: p.flipped}, nil
}

type flipSink struct {
	stack.Sink
	flipped *atomic.Bool
}

const flipAt = 1<<20 + 5

func (f *flipSink) WriteAt(b []byte, off int64) (int, error) {
	if off <= flipAt && flipAt < off+int64(len(b)) && f.flipped.CompareAndSwap(false, true) {
		b = bytes.Clone(b)
		b[flipAt-off] ^= 0xff
	}
	return f.Sink.(io.WriterAt).WriteAt(b, off)
}

func (f *flipSink) Abort(cause error) {
	if a, ok := f.Sink.(stack.Aborter); ok {
		a.Abort(cause)
	}
}

func (f *flipSink) Sum(alg string) (string, int64, bool) {
	if s, ok := f.Sink.(stack.Summer); ok {
		return s.Sum(alg)
	}
	return "", 0, false
}
