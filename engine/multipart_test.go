package engine_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"ferry/engine"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
	"ferry/storage"
)

// TestCopyManyTemporaryNames: in a copy to many destinations, the head
// and every server the tree forwards to write each file under its
// temporary name, renamed over its final name only once the head's copy
// is whole and verified: no file is ever seen short under its final name
// at any destination, and nothing temporary is left. InPlace writes under
// the final names.
func TestCopyManyTemporaryNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fanout  int
		inPlace bool
	}{
		{"chain", 1, false},
		{"tree", 2, false},
		{"in place", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			multiTree(t, src.root)
			want := map[string][]byte{}
			filepath.WalkDir(filepath.Join(src.root, "set"), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(filepath.Join(src.root, "set"), p)
					want["/copy/"+filepath.ToSlash(rel)], _ = os.ReadFile(p)
				}
				return nil
			})
			var dsts []*endpoint
			var ws []*watching
			for range 4 {
				w := &watching{want: want}
				if tc.inPlace {
					w.want = nil
				}
				d := forwarder(t, func(d storage.Driver) storage.Driver { w.Driver = d; return w })
				w.root = d.root
				dsts, ws = append(dsts, d), append(ws, w)
			}
			o := fastOptions()
			o.Verify, o.Fanout, o.InPlace = true, tc.fanout, tc.inPlace
			res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
			if err != nil || res.Failed != 0 || res.Head < 0 {
				t.Fatalf("%+v %v", res, err)
			}
			for i, d := range dsts {
				compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
				if r := res.Dests[i]; r.Delivered != 14 || r.Repaired != 0 {
					t.Errorf("destination %d: %+v", i, r)
				}
				w := ws[i]
				w.mu.Lock()
				if len(w.seen) > 0 {
					t.Errorf("destination %d: files seen under their final names before they were whole: %v", i, w.seen)
				}
				for _, name := range w.created {
					if partname.Is(path.Base(name)) == tc.inPlace {
						t.Errorf("destination %d: created %s", i, name)
					}
				}
				w.mu.Unlock()
			}
			if got := src.cmds.take()["RETR"]; got != 14 {
				t.Errorf("source served %d RETR, want 14 (one per file)", got)
			}
		})
	}
}

// TestCopyManyInterrupted: a copy to many destinations interrupted in
// its tree pass leaves no file short under its final name anywhere; the
// same copy again (sync level size) finishes every destination byte for
// byte, and does not send again what arrived whole before: the files the
// head had whole go to no destination again, and the others' copies are
// renamed from their temporary names.
func TestCopyManyInterrupted(t *testing.T) {
	src := startEndpoint(t, "", nil)
	const n, size = 6, 4 << 20
	for i := range n {
		writeFile(t, filepath.Join(src.root, "set", string(rune('a'+i))), random(size+i))
	}
	want := map[string][]byte{}
	for i := range n {
		name := string(rune('a' + i))
		want["/copy/"+name], _ = os.ReadFile(filepath.Join(src.root, "set", name))
	}
	trip := &tripwire{}
	trip.n.Store(int64(n/2*size + size/2)) // half-way through the fourth file, at the last destination
	var dsts []*endpoint
	var ws []*watching
	for i := range 3 {
		w := &watching{want: want}
		wrap := func(d storage.Driver) storage.Driver { w.Driver = d; return w }
		if i == 2 {
			wrap = func(d storage.Driver) storage.Driver { w.Driver = d; trip.Driver = w; return trip }
		}
		ws = append(ws, w)
		if i == 0 {
			dsts = append(dsts, forwarder(t, wrap)) // the head: the only one that forwards
		} else {
			dsts = append(dsts, startEndpoint(t, "", wrap))
		}
		w.root = dsts[i].root
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trip.fn = cancel
	o := fastOptions()
	o.Verify, o.Fanout, o.Concurrency, o.SyncLevel = true, 2, 1, synclevel.Size
	rep := &arrivals{}
	res, err := engine.CopyMany(ctx, src.Endpoint, targets(dsts, "/copy"), o, rep)
	if err == nil || res.Head != 0 {
		t.Fatalf("not interrupted, or not a tree: %+v %v", res, err)
	}
	// Nothing is at the others until renamed: a resumed task (Target.Has)
	// must not leave it out there.
	if len(rep.got[1])+len(rep.got[2]) > 0 {
		t.Errorf("arrived at the others before the repair pass: %v", rep.got)
	}
	t.Logf("left: %q", res.Partial)
	// The copy says what it left: every whole temporary copy, each named
	// with its destination.
	for i, d := range dsts {
		es, _ := os.ReadDir(filepath.Join(d.root, "copy"))
		for _, e := range es {
			if st, err := e.Info(); err == nil && partname.Is(e.Name()) && st.Size() >= size {
				if p := d.Addr + "/copy/" + e.Name(); !slices.Contains(res.Partial, p) {
					t.Errorf("destination %d: %s left, not in Result.Partial %q", i, p, res.Partial)
				}
			}
		}
	}
	whole := 0 // files whole at the head
	for i, d := range dsts {
		es, _ := os.ReadDir(filepath.Join(d.root, "copy"))
		for _, e := range es {
			if partname.Is(e.Name()) {
				continue
			}
			got, _ := os.ReadFile(filepath.Join(d.root, "copy", e.Name()))
			want, _ := os.ReadFile(filepath.Join(src.root, "set", e.Name()))
			if string(got) != string(want) {
				t.Errorf("destination %d: %s under its final name: %d bytes of %d", i, e.Name(), len(got), len(want))
			} else if i == res.Head {
				whole++
			}
		}
	}
	res, err = engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
	if err != nil || res.Failed != 0 {
		t.Fatalf("again: %+v %v", res, err)
	}
	for i, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
		ws[i].mu.Lock()
		if len(ws[i].seen) > 0 {
			t.Errorf("destination %d: files seen under their final names before they were whole: %v", i, ws[i].seen)
		}
		ws[i].mu.Unlock()
	}
	// What the head had whole goes nowhere again: the others' copies of
	// it are whole under their temporary names.
	t.Logf("%d files of %d were whole at the head", whole, n)
	if res.Bytes > int64(n-whole)*(size+n) {
		t.Errorf("again: moved %d bytes, want at most the %d files not whole at the head (%d bytes)", res.Bytes, n-whole, (n-whole)*(size+n))
	}
}

// TestCopyManyViaTemporaryNames: a destination reached through a relay
// (Target.Via), which the engine cannot see, is written under temporary
// names too: the relay's multicast layer renames each copy once it
// checked it. No file is ever seen short under its final name there.
func TestCopyManyViaTemporaryNames(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	os.Remove(filepath.Join(src.root, "set", "empty")) // a relay makes only the directories of files
	want := map[string][]byte{}
	filepath.WalkDir(filepath.Join(src.root, "set"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(src.root, "set"), p)
			want["/copy/"+filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return nil
	})
	relay := forwarder(t, nil)
	w := &watching{want: want}
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { w.Driver = d; return w })
	w.root = dst.root
	ts := targets([]*endpoint{dst}, "/copy")
	ts[0].Via = &relay.Endpoint
	o := fastOptions()
	o.Verify = true
	res, err := engine.CopyMany(context.Background(), src.Endpoint, ts, o, nil)
	if err != nil || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(dst.root, "copy"))
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		t.Errorf("files seen under their final names before they were whole: %v", w.seen)
	}
	for _, name := range w.created {
		if !partname.Is(path.Base(name)) {
			t.Errorf("created %s", name)
		}
	}
}

// refuseRename refuses, once, to rename a file over the name given.
type refuseRename struct {
	storage.Driver
	name string
	done atomic.Bool
}

func (r *refuseRename) Rename(ctx context.Context, oldname, newname string) error {
	if path.Base(newname) == r.name && r.done.CompareAndSwap(false, true) {
		return fmt.Errorf("refused by the test: %w", storage.ErrPermission)
	}
	return r.Driver.Rename(ctx, oldname, newname)
}

// TestCopyManyLandRefused: a destination that refuses to rename a copy the
// tree left under its temporary name has not got it: the file is sent
// there again, from the head, and the destination ends whole.
func TestCopyManyLandRefused(t *testing.T) {
	src := startEndpoint(t, "", nil)
	multiTree(t, src.root)
	bad := &refuseRename{name: "f05"}
	// The head is the one that forwards; the others are its leaves.
	dsts := []*endpoint{forwarder(t, nil), startEndpoint(t, "", func(d storage.Driver) storage.Driver { bad.Driver = d; return bad }), startEndpoint(t, "", nil)}
	o := fastOptions()
	o.Verify, o.Fanout = true, 2
	res, err := engine.CopyMany(context.Background(), src.Endpoint, targets(dsts, "/copy"), o, nil)
	if err != nil || res.Failed != 0 || res.Head != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if !bad.done.Load() {
		t.Fatal("no rename was refused: the test did not test")
	}
	for _, d := range dsts {
		compareTrees(t, filepath.Join(src.root, "set"), filepath.Join(d.root, "copy"))
	}
	if r := res.Dests[1]; r.Repaired != 1 || r.Delivered != 14 {
		t.Errorf("the refusing destination: %+v, want f05 repaired", r)
	}
	if r := res.Dests[2]; r.Repaired != 0 || r.Delivered != 14 {
		t.Errorf("the other leaf: %+v, want all through the tree", r)
	}
}
