//go:build interop

package interop

// The engine's tar mode: trees of small files packed and unpacked as tar
// streams by ferry's tar layer, or by tar through GCT's popen, in every
// combination; members that fail alone; servers killed mid-stream.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/client"
	"ferry/internal/synclevel"
)

// tarPairs are the combinations tar mode must handle: ferry's layer at
// either end, GCT's popen tar at either end.
var tarPairs = []struct {
	name     string
	src, dst starter
}{
	{"ferry-to-ferry", shmFerry, shmFerry},
	{"gct-popen-to-ferry", func(t *testing.T) server { return startGCTPopen(t) }, shmFerry},
	{"ferry-to-gct-popen", shmFerry, func(t *testing.T) server { return startGCTPopen(t) }},
	{"gct-popen-to-gct-popen", func(t *testing.T) server { return startGCTPopen(t) }, func(t *testing.T) server { return startGCTPopen(t) }},
}

func TestEngineTar(t *testing.T) {
	needTools(t)
	for _, p := range tarPairs {
		t.Run(p.name, func(t *testing.T) {
			src, dst := p.src(t), p.dst(t)
			for _, verify := range []bool{false, true} {
				t.Run(fmt.Sprintf("verify=%v", verify), func(t *testing.T) {
					name := fmt.Sprintf("tree-%v", verify)
					n := makeEngineTree(t, src.Path(name), !involvesGCT(src, dst))
					rec := newEngineRecorder()
					o := engineOptions()
					o.Recursive, o.Verify, o.Tar = true, verify, engine.TarAlways
					res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, name), Dst: epPath(dst, "copied/"+name)}}, o, rec)
					checkClean(t, res, err, rec, n)
					if res.Settings.Batches == 0 || !strings.Contains(res.Settings.TarReason, "tar streams") {
						t.Errorf("no tar streams: %d batches, reason %q", res.Settings.Batches, res.Settings.TarReason)
					}
					if err := compareTrees(src.Path(name), dst.Path("copied/"+name)); err != nil {
						t.Fatal(err)
					}
					if verify {
						for _, rel := range rec.outcomes(epPath(dst, "copied/"+name), engine.Transferred) {
							if f, _ := rec.result(epPath(dst, "copied/"+name+"/"+rel)); !strings.HasPrefix(f.Checksum, res.Settings.Algorithm+":") {
								t.Errorf("%s transferred with checksum %q", rel, f.Checksum)
							}
						}
					}
				})
			}
		})
	}
}

// TestEngineTarManyStreams: tar streams on several data streams (as the
// tuner gives them over a wide-area link), in every combination. GCT's
// ordering driver passes writes through in the order they come (it orders
// only reads), so a batch that popen's tar unpacked from several streams
// arrived out of order ("tar: Skipping to next header") and every batch
// failed, again and again.
func TestEngineTarManyStreams(t *testing.T) {
	needTools(t)
	for _, p := range tarPairs {
		t.Run(p.name, func(t *testing.T) {
			src, dst := p.src(t), p.dst(t)
			const files, size = 400, 64 << 10
			makeRandomFiles(t, src.Path("t"), "f-%04d.dat", files, size, size)
			rec := newEngineRecorder()
			o := engineOptions()
			o.Recursive, o.Tar, o.Parallelism, o.Concurrency = true, engine.TarAlways, 4, 1
			res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "t"), Dst: epPath(dst, "t")}}, o, rec)
			if err != nil || res.Transferred != files || res.Failed != 0 || res.Faults != 0 || res.Settings.Batches == 0 {
				t.Fatalf("%d batches, %d transferred, %d failed, %d faults, %v; want %d in tar streams, no fault\nfaults:\n%s",
					res.Settings.Batches, res.Transferred, res.Failed, res.Faults, err, files, rec.faultLog())
			}
			if err := compareTrees(src.Path("t"), dst.Path("t")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEngineTarAuto: with no option the engine packs a tree of many small
// files between ferry servers and says why, and leaves a few files alone.
func TestEngineTarAuto(t *testing.T) {
	needTools(t)
	src, dst := shmFerry(t), shmFerry(t)
	makeManySmall(t, src.Path("many"), 100)
	makeManySmall(t, src.Path("few"), 5)
	for _, tc := range []struct {
		dir     string
		mode    engine.TarMode
		batches bool
	}{{"many", engine.TarAuto, true}, {"few", engine.TarAuto, false}, {"many", engine.TarNever, false}} {
		rec := newEngineRecorder()
		o := engineOptions()
		o.Recursive, o.Tar = true, tc.mode
		dstName := fmt.Sprintf("%s-%v", tc.dir, tc.mode)
		res, err := runEngine(t, src, dst, []engine.Item{{Src: "/" + tc.dir, Dst: "/" + dstName}}, o, rec)
		checkClean(t, res, err, rec, res.Files)
		if (res.Settings.Batches > 0) != tc.batches || (res.Settings.TarReason != "") != tc.batches {
			t.Errorf("%s, %v: %d batches, reason %q", tc.dir, tc.mode, res.Settings.Batches, res.Settings.TarReason)
		}
		if err := compareTrees(src.Path(tc.dir), dst.Path(dstName)); err != nil {
			t.Error(err)
		}
	}
}

// TestEngineTarMemberFails: a file that vanishes between the listing and
// its tar stream fails alone, with the reason; the rest of its batch
// arrives.
func TestEngineTarMemberFails(t *testing.T) {
	needTools(t)
	src, dst := shmFerry(t), shmFerry(t)
	makeManySmall(t, src.Path("t"), 64)
	victim := src.Path("t/small-0007.dat")
	var once sync.Once
	rec := newEngineRecorder()
	o := engineOptions()
	o.Recursive, o.Tar = true, engine.TarAlways
	o.Skip = func(s, _ string) bool {
		if strings.HasSuffix(s, "small-0063.dat") { // listed after the victim
			once.Do(func() { os.Remove(victim) })
		}
		return false
	}
	res, err := runEngine(t, src, dst, []engine.Item{{Src: "/t", Dst: "/t"}}, o, rec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transferred != 63 || res.Failed != 1 || len(res.FailedFiles) != 1 {
		t.Fatalf("transferred %d, failed %d; want 63, 1", res.Transferred, res.Failed)
	}
	if f := res.FailedFiles[0]; f.Src != "/t/small-0007.dat" || !strings.Contains(f.Err.Error(), "NOT_FOUND") {
		t.Errorf("failed %s: %v", f.Src, f.Err)
	}
	if _, err := os.Stat(dst.Path("t/small-0007.dat")); err == nil {
		t.Error("the vanished file exists at the destination")
	}
}

// startedRecorder is an engineRecorder that keeps the settings Started
// reports.
type startedRecorder struct {
	*engineRecorder
	mu      sync.Mutex
	started []engine.Settings
}

func (r *startedRecorder) Started(s engine.Settings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, s)
}

// TestEngineTarDecidedOnFilesThatCan: tar streams asked for, and the
// first window of the plan holds only a file of no tree (which no tar
// stream carries): the decision waits for a window with files that can
// go in one, and the settings reported, once, say the tree's files move
// as tar streams. It was decided on the first window, against tar for the
// whole run (TestWebApp's STARTED event lacked it).
func TestEngineTarDecidedOnFilesThatCan(t *testing.T) {
	needTools(t)
	src, dst := shmFerry(t), shmFerry(t)
	if err := os.WriteFile(src.Path("readme.txt"), []byte("read me"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeManySmall(t, src.Path("t"), 40)
	rec := &startedRecorder{engineRecorder: newEngineRecorder()}
	o := engineOptions()
	o.Recursive, o.Tar = true, engine.TarAlways
	items := []engine.Item{{Src: "/readme.txt", Dst: "/readme.txt"}, {Src: "/t", Dst: "/t"}}
	res, err := runEngine(t, src, dst, items, o, rec)
	if err != nil || res.Transferred != 41 {
		t.Fatalf("%d transferred, %v; want 41", res.Transferred, err)
	}
	if len(rec.started) != 1 {
		t.Fatalf("settings reported %d times, want once", len(rec.started))
	}
	if s := rec.started[0]; !strings.Contains(s.TarReason, "they move as tar streams") || res.Settings.Batches == 0 {
		t.Errorf("settings reported: tar %q; %d batches in all; want the tree's files in tar streams", s.TarReason, res.Settings.Batches)
	}
	if err := compareTrees(src.Path("t"), dst.Path("t")); err != nil {
		t.Fatal(err)
	}
}

// TestEngineTarKilled: kill -9 of either server in the middle of a tar
// stream. The copy resumes when it is back, every file arrives intact, and
// the files reported transferred before the kill are not sent again (they
// keep the inode their rename gave them).
func TestEngineTarKilled(t *testing.T) {
	needTools(t)
	for _, victim := range []string{"destination", "source"} {
		t.Run(victim, func(t *testing.T) {
			src := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
			dst := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
			const files, size = 3000, 40 << 10
			makeRandomFiles(t, src.Path("t"), "f-%05d.dat", files, size, size)
			o := engineOptions()
			o.Recursive, o.Tar, o.Concurrency = true, engine.TarAlways, 2
			o.Deadline = time.Now().Add(60 * time.Second)
			rec := newEngineRecorder()
			done := copyInBackground(src, dst, []engine.Item{{Src: "/t", Dst: "/t"}}, o, rec)
			deadline := time.Now().Add(30 * time.Second)
			for len(rec.outcomes("/t", engine.Transferred)) < files/4 {
				select {
				case r := <-done:
					t.Fatalf("copy ended before a server could be killed: %+v, %v", r.res, r.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("a quarter of the files did not arrive within 30 s")
				}
				time.Sleep(time.Millisecond)
			}
			killed := map[*ferryServer]string{src: "source", dst: "destination"}
			for s, name := range killed {
				if name == victim {
					s.kill9()
					time.Sleep(200 * time.Millisecond)
					s.restart()
				}
			}
			before := map[string]uint64{}
			for _, rel := range rec.outcomes("/t", engine.Transferred) {
				before[rel] = inode(t, dst.Path("t/"+rel))
			}
			t.Logf("killed the %s with %d files reported transferred", victim, len(before))
			var r copyResult
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("copy did not end within 60 s of the restart")
			}
			if r.err != nil || r.res.Transferred != files || r.res.Failed != 0 {
				t.Fatalf("transferred %d, failed %d, err %v\nfaults:\n%s", r.res.Transferred, r.res.Failed, r.err, rec.faultLog())
			}
			if r.res.Faults == 0 {
				t.Error("no fault counted although a server was killed")
			}
			if err := compareTrees(src.Path("t"), dst.Path("t")); err != nil {
				t.Fatal(err)
			}
			for rel, ino := range before {
				if got := inode(t, dst.Path("t/"+rel)); got != ino {
					t.Errorf("%s was sent again after it was reported transferred", rel)
				}
			}
			leftovers, _ := filepath.Glob(dst.Path("t/.ferry-*"))
			t.Logf("%d temporary files left by the killed stream", len(leftovers))
		})
	}
}

// TestEngineTarWholeNotSentAgain: a tar stream breaks (kill -9 of a
// server) after members arrived whole that no end had reported yet (GCT's
// tar through popen reports none until the stream ends; ferry's layer
// reports them as it goes). The members whole at the destination when it
// broke are looked up and settled by checksum, not sent again with the
// rest of their batch: they keep their inode and ctime.
func TestEngineTarWholeNotSentAgain(t *testing.T) {
	needTools(t)
	for _, c := range []struct {
		name       string
		dst        func(t *testing.T) restartable
		killSource bool
	}{
		{"ferry-to-gct-popen/kill-source", func(t *testing.T) restartable { return startGCTPopen(t) }, true},
		{"ferry-to-ferry/kill-destination", func(t *testing.T) restartable {
			return startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
			dst := c.dst(t)
			victim := restartable(src)
			if !c.killSource {
				victim = dst
			}
			wholeNotSentAgain(t, src, dst, victim)
		})
	}
}

// wholeNotSentAgain copies a tree of small files from src to dst as tar
// streams and kills victim once 50 files have arrived at dst; none of
// those whole there after the kill may be written again.
func wholeNotSentAgain(t *testing.T, src, dst, victim restartable) {
	const files, size = 2000, 64 << 10
	makeRandomFiles(t, src.Path("t"), "f-%05d.dat", files, size, size)
	o := engineOptions()
	o.Recursive, o.Tar, o.Concurrency = true, engine.TarAlways, 1
	o.Deadline = time.Now().Add(90 * time.Second)
	rec := newEngineRecorder()
	done := copyInBackground(src, dst, []engine.Item{{Src: "/t", Dst: epPath(dst, "t")}}, o, rec)
	// whole lists the files whole at the destination.
	whole := func() []string {
		var out []string
		for i := range files {
			rel := fmt.Sprintf("f-%05d.dat", i)
			if compareFiles(src.Path("t/"+rel), dst.Path("t/"+rel)) == nil {
				out = append(out, rel)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for arrived := 0; arrived < 50; time.Sleep(5 * time.Millisecond) {
		select {
		case r := <-done:
			t.Fatalf("copy ended before a server could be killed: %+v, %v", r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("50 files did not arrive within 60 s")
		}
		arrived = 0
		for i := range files {
			if fi, err := os.Stat(dst.Path(fmt.Sprintf("t/f-%05d.dat", i))); err == nil && fi.Size() == size {
				arrived++
			}
		}
	}
	victim.kill9()
	before := whole()
	ids := fileIDs(t, dst.Path("t"), before)
	reported := len(rec.outcomes(epPath(dst, "t"), engine.Transferred))
	victim.restart()
	t.Logf("killed a server with %d files whole at the destination, %d reported", len(before), reported)
	var r copyResult
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("copy did not end within 90 s of the restart")
	}
	if r.err != nil || r.res.Transferred != files || r.res.Failed != 0 {
		t.Fatalf("transferred %d, failed %d, err %v\nfaults:\n%s", r.res.Transferred, r.res.Failed, r.err, rec.faultLog())
	}
	if err := compareTrees(src.Path("t"), dst.Path("t")); err != nil {
		t.Fatal(err)
	}
	again := 0
	for rel, id := range fileIDs(t, dst.Path("t"), before) {
		if id != ids[rel] {
			again++
		}
	}
	if again > 0 {
		t.Errorf("%d of the %d files whole at the destination when the stream broke were sent again; faults:\n%s", again, len(before), rec.faultLog())
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestEngineChecksumLists: the sync level checksum over a copied tree in
// which a few files changed at the destination (same sizes) sends only
// those again, whichever way each end computes its list: ferry's cksum
// layer, md5sum through GCT's popen, or CKSM pipelined (GCT without it).
func TestEngineChecksumLists(t *testing.T) {
	needTools(t)
	gctPopen := func(t *testing.T) server { return startGCTPopen(t) }
	for _, p := range []struct {
		name     string
		src, dst starter
	}{
		{"ferry-to-ferry", debugFerry, debugFerry},
		{"ferry-to-gct-popen", shmFerry, gctPopen},
		{"gct-popen-to-ferry", gctPopen, shmFerry},
		{"gct-to-gct", startGCT, startGCT},
	} {
		t.Run(p.name, func(t *testing.T) {
			src, dst := p.src(t), p.dst(t)
			makeRandomFiles(t, src.Path("t/a"), "f-%03d.dat", 60, 1, 8<<10)
			makeRandomFiles(t, src.Path("t/b"), "g-%03d.dat", 5, 1<<10, 1<<10)
			items := []engine.Item{{Src: epPath(src, "t"), Dst: epPath(dst, "t")}}
			o := engineOptions()
			o.Recursive, o.Algorithm = true, "MD5"
			res, err := runEngine(t, src, dst, items, o, newEngineRecorder())
			if err != nil || res.Transferred != 65 {
				t.Fatalf("first copy: %d transferred, %v", res.Transferred, err)
			}
			changed := []string{"t/a/f-007.dat", "t/a/f-059.dat", "t/b/g-002.dat"}
			for _, c := range changed {
				flipByte(t, dst.Path(c), 0)
			}
			logged := map[server]int{} // the logs so far: the first copy's
			for _, s := range []server{src, dst} {
				if f, ok := s.(*ferryServer); ok {
					logged[s] = len(f.log.String())
				}
			}
			o.SyncLevel = synclevel.Checksum
			rec := newEngineRecorder()
			res, err = runEngine(t, src, dst, items, o, rec)
			if err != nil || res.Transferred != len(changed) || res.Skipped != 65-len(changed) || res.Failed != 0 {
				t.Fatalf("sync: %d transferred, %d skipped, %d failed, %v\n%s", res.Transferred, res.Skipped, res.Failed, err, rec.faultLog())
			}
			if err := compareTrees(src.Path("t"), dst.Path("t")); err != nil {
				t.Fatal(err)
			}
			for _, s := range []server{src, dst} {
				if f, ok := s.(*ferryServer); ok && f.debug {
					log := f.log.String()[logged[s]:]
					if n, lists := strings.Count(log, "verb=CKSM"), strings.Count(log, `verb=SITE arg="MEMBERS `); n > 0 || lists != 2 {
						t.Errorf("%s: %d CKSM commands and %d checksum lists; want none and one per directory", s.Addr(), n, lists)
					}
				}
			}
		})
	}
}

// debugFerry starts a ferry server that logs every command.
func debugFerry(t *testing.T) server {
	s := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--log-level", "debug"}})
	s.debug = true
	return s
}

// TestMulticastOptIn: ferry gridftp offers the multicast stack, which
// makes it connect to other hosts, only when told (--multicast), as GCT
// offers it only through -fs-whitelist; the tar layers always.
func TestMulticastOptIn(t *testing.T) {
	needFerry(t)
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--multicast"}, true}} {
		srv := startFerryConfig(t, ferryConfig{Anonymous: true, Args: tc.args})
		c, err := client.Dial(context.Background(), srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Login(context.Background(), "anonymous", "x"); err != nil {
			t.Fatal(err)
		}
		layers, _ := c.Feature("DISKSTACK")
		c.Close()
		if got := strings.Contains(layers, "gridftp_multicast"); got != tc.want || !strings.Contains(layers, "tar") {
			t.Errorf("%v: DISKSTACK %q", tc.args, layers)
		}
	}
}
