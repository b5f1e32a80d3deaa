//go:build interop

package interop

// globus-url-copy scenarios. Each runs against any server (a starter); the
// TestGCT... functions run them against globus-gridftp-server to prove the
// harness and the expectations, the TestFerry... functions against ferry.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// modes are the data channel modes every transfer scenario covers.
var modes = []struct {
	name  string
	flags []string
}{
	{"stream", nil},
	{"p4", []string{"-p", "4"}},
}

func withFlags(flags []string, args ...string) []string {
	return append(append([]string(nil), flags...), args...)
}

func TestGCTGetPut(t *testing.T)   { needTools(t); testGetPut(t, startGCT) }
func TestFerryGetPut(t *testing.T) { needTools(t); testGetPut(t, startFerry) }

// testGetPut: globus-url-copy get and put of a few MiB and of a zero-byte
// file, in stream mode and with -p 4.
func testGetPut(t *testing.T, start starter) {
	srv := start(t)
	local := t.TempDir()
	files := []struct {
		name string
		size int64
	}{
		{"big.dat", 3<<20 + 12345},
		{"zero.dat", 0},
	}
	for _, f := range files {
		writeRandomFile(t, filepath.Join(local, f.name), f.size)
	}
	for _, m := range modes {
		for _, f := range files {
			src := filepath.Join(local, f.name)
			t.Run(m.name+"/put/"+f.name, func(t *testing.T) {
				rel := "put-" + m.name + "-" + f.name
				guc(t, withFlags(m.flags, fileURL(src), srv.URL(rel))...)
				if err := compareFiles(src, srv.Path(rel)); err != nil {
					t.Fatal(err)
				}
			})
			t.Run(m.name+"/get/"+f.name, func(t *testing.T) {
				rel := "get-" + m.name + "-" + f.name
				copyFile(t, src, srv.Path(rel))
				out := filepath.Join(t.TempDir(), f.name)
				guc(t, withFlags(m.flags, srv.URL(rel), fileURL(out))...)
				if err := compareFiles(src, out); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestGCTTree(t *testing.T)   { needTools(t); testTree(t, startGCT) }
func TestFerryTree(t *testing.T) { needTools(t); testTree(t, startFerry) }

// testTree: `-fast -r -cd` upload of a tree (nested dirs, empty files, names
// with spaces) into a destination whose parents do not exist, then download
// back the same way.
func testTree(t *testing.T, start starter) {
	srv := start(t)
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)
	guc(t, "-fast", "-r", "-cd", dirURL(src), srv.URL("up/tree/"))
	if err := compareTrees(src, srv.Path("up/tree")); err != nil {
		t.Fatalf("upload: %v", err)
	}
	back := filepath.Join(t.TempDir(), "back")
	guc(t, "-fast", "-r", "-cd", srv.URL("up/tree/"), dirURL(back))
	if err := compareTrees(src, back); err != nil {
		t.Fatalf("download: %v", err)
	}
}

func TestGCTManySmall(t *testing.T)   { needTools(t); testManySmall(t, startGCT) }
func TestFerryManySmall(t *testing.T) { needTools(t); testManySmall(t, startFerry) }

// testManySmall: 500 files of 1–4 KiB with `-fast -pp -cc 4` (pipelined
// commands on 4 sessions), up and back down.
func testManySmall(t *testing.T, start starter) {
	srv := start(t)
	src := filepath.Join(t.TempDir(), "many")
	makeManySmall(t, src, 500)
	flags := []string{"-fast", "-pp", "-cc", "4", "-cd"}
	guc(t, withFlags(flags, dirURL(src), srv.URL("many/"))...)
	if err := compareTrees(src, srv.Path("many")); err != nil {
		t.Fatalf("upload: %v", err)
	}
	back := filepath.Join(t.TempDir(), "back")
	guc(t, withFlags(flags, srv.URL("many/"), dirURL(back))...)
	if err := compareTrees(src, back); err != nil {
		t.Fatalf("download: %v", err)
	}
}

func TestGCTPartial(t *testing.T)   { needTools(t); testPartial(t, startGCT) }
func TestFerryPartial(t *testing.T) { needTools(t); testPartial(t, startFerry) }

// testPartial: `-off A -len B` get (ERET P A B) and put (ESTO A A). The
// destination is a new file: B bytes at offset A, zeros before.
func testPartial(t *testing.T, start starter) {
	srv := start(t)
	src := filepath.Join(t.TempDir(), "src.dat")
	writeRandomFile(t, src, 2<<20+999)
	const off, n = 300001, 1<<20 + 5
	rng := []string{"-off", strconv.Itoa(off), "-len", strconv.Itoa(n)}
	copyFile(t, src, srv.Path("whole.dat"))
	for _, m := range modes {
		t.Run(m.name+"/get", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "part.dat")
			guc(t, withFlags(append(m.flags, rng...), srv.URL("whole.dat"), fileURL(out))...)
			checkPartial(t, src, out, off, n)
		})
		t.Run(m.name+"/put", func(t *testing.T) {
			rel := "part-" + m.name + ".dat"
			guc(t, withFlags(append(m.flags, rng...), fileURL(src), srv.URL(rel))...)
			checkPartial(t, src, srv.Path(rel), off, n)
		})
	}
}

// checkPartial checks that got is src[off:off+n] at offset off, zeros before.
func checkPartial(t *testing.T, src, got string, off, n int64) {
	t.Helper()
	want := readFile(t, src)[off : off+n]
	b := readFile(t, got)
	if int64(len(b)) != off+n {
		t.Fatalf("%s: size %d, want %d (offset %d + length %d)", got, len(b), off+n, off, n)
	}
	if i := mismatch(make([]byte, off), b[:off]); i >= 0 {
		t.Errorf("%s: byte %d before the range is %#x, want 0", got, i, b[i])
	}
	if i := mismatch(want, b[off:]); i >= 0 {
		t.Errorf("%s: differs from source at offset %d", got, off+int64(i))
	}
}

func TestGCTVerifyChecksum(t *testing.T)   { needTools(t); testVerifyChecksum(t, startGCT) }
func TestFerryVerifyChecksum(t *testing.T) { needTools(t); testVerifyChecksum(t, startFerry) }

// testVerifyChecksum: -verify-checksum (CKSM on the server, computed locally
// for file: URLs) on get and put in both modes. globus-url-copy computes only
// MD5 for local files, so ADLER32 is checked on a third-party copy within
// the server (CKSM ADLER32 on both ends).
func testVerifyChecksum(t *testing.T, start starter) {
	srv := start(t)
	src := filepath.Join(t.TempDir(), "src.dat")
	writeRandomFile(t, src, 3<<20+77)
	copyFile(t, src, srv.Path("src.dat"))
	for _, m := range modes {
		flags := append([]string{"-verify-checksum"}, m.flags...)
		t.Run(m.name+"/put", func(t *testing.T) {
			rel := "put-" + m.name + ".dat"
			guc(t, withFlags(flags, fileURL(src), srv.URL(rel))...)
			if err := compareFiles(src, srv.Path(rel)); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(m.name+"/get", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.dat")
			guc(t, withFlags(flags, srv.URL("src.dat"), fileURL(out))...)
			if err := compareFiles(src, out); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(m.name+"/third-party-adler32", func(t *testing.T) {
			rel := "tp-" + m.name + ".dat"
			guc(t, withFlags(append(flags, "-checksum-alg", "ADLER32"), srv.URL("src.dat"), srv.URL(rel))...)
			if err := compareFiles(src, srv.Path(rel)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGCTSync(t *testing.T)   { needTools(t); testSync(t, startGCT) }
func TestFerrySync(t *testing.T) { needTools(t); testSync(t, startFerry) }

// testSync: upload a tree, then at the destination change one file's content
// (same size, so only CKSM can tell) and delete another; `-sync -sync-level 3`
// must restore exactly those two and rewrite nothing else. Unchanged files are
// back-dated first, so a rewrite would show as a new mtime.
func testSync(t *testing.T, start starter) {
	srv := start(t)
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)
	flags := []string{"-r", "-cd", "-sync", "-sync-level", "3"}
	guc(t, withFlags(flags, dirURL(src), srv.URL("sync/"))...)
	dst := srv.Path("sync")
	if err := compareTrees(src, dst); err != nil {
		t.Fatalf("first sync: %v", err)
	}

	changed, removed := "a/one.dat", "a/b/two.dat"
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	setTreeMtime(t, dst, old)
	b := readFile(t, filepath.Join(dst, changed))
	b[len(b)/2] ^= 0xff
	writeFile(t, filepath.Join(dst, changed), b)
	os.Chtimes(filepath.Join(dst, changed), old, old)
	if err := os.Remove(filepath.Join(dst, removed)); err != nil {
		t.Fatal(err)
	}

	guc(t, withFlags(flags, dirURL(src), srv.URL("sync/"))...)
	if err := compareTrees(src, dst); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	for _, f := range treeFiles {
		st, err := os.Stat(filepath.Join(dst, filepath.FromSlash(f.rel)))
		if err != nil {
			t.Fatal(err)
		}
		rewritten := !st.ModTime().Equal(old)
		if want := f.rel == changed || f.rel == removed; rewritten != want {
			t.Errorf("%s: rewritten=%v, want %v (mtime %v)", f.rel, rewritten, want, st.ModTime())
		}
	}
}

func TestGCTRestart(t *testing.T) {
	needTools(t)
	t.Run("dest-killed", func(t *testing.T) {
		testRestart(t, startGCTServer(t), startGCTServer(t), false)
	})
	t.Run("source-killed", func(t *testing.T) {
		testRestart(t, startGCTServer(t), startGCTServer(t), true)
	})
}

func TestFerryRestart(t *testing.T) {
	needTools(t)
	t.Run("dest-killed", func(t *testing.T) {
		testRestart(t, startGCTServer(t), startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true}), false)
	})
	t.Run("source-killed", func(t *testing.T) {
		testRestart(t, startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true}), startGCTServer(t), true)
	})
}

// restartSize is the size of the file the restart test sends.
const restartSize = 1 << 30

// testRestart: a third-party copy of a large file with -rst and -p 4; once
// some data has reached dst, one server (dst, or src if killSrc) is killed
// with SIGKILL and started again on the same port and tree. The copy must
// complete and be correct.
//
// It is third-party because globus-url-copy restarts only server-to-server
// transfers: a put from a local file fails at once with "Connection reset
// by peer" (seen with GCT as the server too). The copy is usually too short
// for the 5 s restart markers, so the retry starts from the beginning.
func testRestart(t *testing.T, src, dst restartable, killSrc bool) {
	local := filepath.Join(bigTempDir(t), "big.dat")
	writeRandomFile(t, local, restartSize)
	if err := os.Rename(local, src.Path("big.dat")); err != nil {
		copyFile(t, local, src.Path("big.dat"))
	}
	victim := dst
	if killSrc {
		victim = src
	}

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := runTool(context.Background(), 3*time.Minute, "", "globus-url-copy",
			"-rst", "-rst-retries", "5", "-rst-interval", "1", "-p", "4", "-vb",
			src.URL("big.dat"), dst.URL("big.dat"))
		done <- result{out, err}
	}()

	const threshold = 32 << 20
	root := dst.Path("")
	deadline := time.Now().Add(60 * time.Second)
	for dirAllocated(root) < threshold {
		select {
		case r := <-done:
			t.Fatalf("copy ended before the server could be killed (restart not exercised): err=%v\n%s", r.err, r.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no data arrived in %s within 60s", root)
		}
		time.Sleep(2 * time.Millisecond)
	}
	victim.kill9()
	t.Logf("killed %s after %v with %d MiB written", victim.Name(), time.Since(start).Round(time.Millisecond), dirAllocated(root)>>20)
	victim.restart()

	r := <-done
	if r.err != nil {
		t.Fatalf("copy with restart: %v", r.err)
	}
	t.Logf("copy finished %v after start", time.Since(start).Round(time.Millisecond))
	if err := compareFiles(src.Path("big.dat"), dst.Path("big.dat")); err != nil {
		t.Fatal(err)
	}
}

func TestGCTThirdParty(t *testing.T) {
	needTools(t)
	testThirdParty(t, startGCT(t), startGCT(t))
}

func TestFerryThirdParty(t *testing.T) {
	needTools(t)
	t.Run("gct-to-ferry", func(t *testing.T) { testThirdParty(t, startGCT(t), startFerry(t)) })
	t.Run("ferry-to-gct", func(t *testing.T) { testThirdParty(t, startFerry(t), startGCT(t)) })
	t.Run("ferry-to-ferry", func(t *testing.T) { testThirdParty(t, startFerry(t), startFerry(t)) })
}

// testThirdParty: globus-url-copy between two servers (data flows directly
// from src to dst), a few MiB and a zero-byte file in stream mode and with
// -p 4, and a tree with -fast -r -cd.
func testThirdParty(t *testing.T, src, dst server) {
	local := t.TempDir()
	files := []struct {
		name string
		size int64
	}{
		{"big.dat", 5<<20 + 333},
		{"zero.dat", 0},
	}
	for _, f := range files {
		writeRandomFile(t, filepath.Join(local, f.name), f.size)
		copyFile(t, filepath.Join(local, f.name), src.Path(f.name))
	}
	for _, m := range modes {
		for _, f := range files {
			t.Run(m.name+"/"+f.name, func(t *testing.T) {
				rel := m.name + "-" + f.name
				guc(t, withFlags(m.flags, src.URL(f.name), dst.URL(rel))...)
				if err := compareFiles(filepath.Join(local, f.name), dst.Path(rel)); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	t.Run("tree", func(t *testing.T) {
		tree := filepath.Join(local, "tree")
		makeTree(t, tree)
		copyTree(t, tree, src.Path("tree"))
		guc(t, "-fast", "-r", "-cd", "-p", "2", src.URL("tree/"), dst.URL("copied/tree/"))
		if err := compareTrees(tree, dst.Path("copied/tree")); err != nil {
			t.Fatal(err)
		}
	})
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	m, err := listTree(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, rel := range sortedKeys(m) {
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if m[rel].dir {
			if err := os.MkdirAll(to, 0o777); err != nil {
				t.Fatal(err)
			}
			continue
		}
		copyFile(t, filepath.Join(src, filepath.FromSlash(rel)), to)
	}
}
