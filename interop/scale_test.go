//go:build interop

package interop

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/checksum"
	"ferry/gridftp/client"
	"ferry/storage/synthetic"
)

// syntheticTree returns the tree the root "synthetic:"+spec serves.
func syntheticTree(t *testing.T, spec string) *synthetic.FS {
	t.Helper()
	syn, err := synthetic.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return syn
}

// TestFerrySyntheticToSink: a verified ferry copy of a synthetic tree into
// a sink, the benchmark drivers of bench/scale.sh, moves and verifies
// every file, one transfer per file (where the sink, which keeps no data,
// answers CKSM from what it hashed) and as tar streams; the sink then
// knows each file's checksum, which is that of its generated content.
func TestFerrySyntheticToSink(t *testing.T) {
	const spec = "files=2000,size=100,per-dir=100,fan=10"
	syn := syntheticTree(t, spec)
	want := syntheticSums(t, syn)
	for _, tar := range []string{"never", "always"} {
		t.Run("tar "+tar, func(t *testing.T) {
			src := startFerryConfig(t, ferryConfig{Root: "synthetic:" + spec, Anonymous: true})
			dst := startFerryConfig(t, ferryConfig{Root: "sink:", Anonymous: true})
			r := mustCopy(t, "-r", "--verify-checksum", "--tar", tar, src.URL("/"), dst.URL("/out/"))
			checkSummary(t, r, len(want), len(want), 0)
			if s := settingsLine(r); !strings.Contains(s, "checksum XXH128") {
				t.Errorf("the copy did not verify with XXH128: %s", s)
			}
			checkSink(t, dst, syn, "/out", want)
		})
	}
}

// syntheticSums returns the XXH128 of every file of syn, by number.
func syntheticSums(t *testing.T, syn *synthetic.FS) []string {
	t.Helper()
	sums := make([]string, syn.Tree().Files)
	for i := range sums {
		f, err := syn.Open(context.Background(), syn.Path(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if sums[i], err = checksum.Sum(context.Background(), f, 0, -1, checksum.XXH128); err != nil {
			t.Fatal(err)
		}
	}
	return sums
}

// checkSink checks that the sink dst holds every file of syn below dir,
// each with the checksum in want.
func checkSink(t *testing.T, dst *ferryServer, syn *synthetic.FS, dir string, want []string) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, dst.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(ctx, "anonymous", "x"); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, len(want))
	for i := range paths {
		paths[i] = dir + syn.Path(int64(i))
	}
	sums, errs, err := c.ChecksumAll(ctx, checksum.XXH128, paths)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range paths {
		if errs[i] != nil || sums[i] != want[i] {
			if bad++; bad <= 3 {
				t.Errorf("%s: the sink's checksum %q, %v; want %q", paths[i], sums[i], errs[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d files wrong at the sink", bad, len(paths))
	}
}

// TestServiceSyntheticToSink: a task of the service from a synthetic tree
// into a sink, as bench/scale.sh runs it, verified (the service's
// default), SUCCEEDS with every file transferred and at the sink.
func TestServiceSyntheticToSink(t *testing.T) {
	const spec = "files=2000,size=100,per-dir=100,fan=10"
	syn := syntheticTree(t, spec)
	want := syntheticSums(t, syn)
	c, _, dst := syntheticService(t, spec, serviceConfig{})
	task := c.succeeded(c.transfer("-r", "src:/", "dst:/out/"), time.Minute)
	if task.FilesTransferred != int64(len(want)) {
		t.Errorf("task: %d files transferred, want %d", task.FilesTransferred, len(want))
	}
	checkSink(t, dst, syn, "/out", want)
}

// TestFerrySyntheticToDisk: ferry copy of a synthetic tree onto a real
// disk makes exactly its files, each with the bytes the tree generates
// and its modification time; a sync by time then finds nothing to do.
func TestFerrySyntheticToDisk(t *testing.T) {
	const spec = "files=500,size=1000,per-dir=50,fan=4"
	syn := syntheticTree(t, spec)
	src := startFerryConfig(t, ferryConfig{Root: "synthetic:" + spec, Anonymous: true})
	dst := startFerry(t).(*ferryServer)
	r := mustCopy(t, "-r", "--preserve-timestamp", src.URL("/"), dst.URL("/out/"))
	checkSummary(t, r, 500, 500, 0)
	r = mustCopy(t, "-r", "--preserve-timestamp", "-s", "mtime", src.URL("/"), dst.URL("/out/"))
	checkSummary(t, r, 500, 0, 500)
	files := 0
	err := filepath.WalkDir(dst.Path("out"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return err
	})
	if err != nil || files != 500 {
		t.Fatalf("%d files on disk (%v), want 500", files, err)
	}
	want := make([]byte, 1000)
	for i := range int64(500) {
		p := dst.Path("out" + syn.Path(i))
		got, err := os.ReadFile(p)
		synthetic.Read(i, want, 0)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; not the generated content", syn.Path(i), len(got), err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(synthetic.ModTime) {
			t.Fatalf("%s: modified %v, want %v", syn.Path(i), fi.ModTime(), synthetic.ModTime)
		}
	}
}
