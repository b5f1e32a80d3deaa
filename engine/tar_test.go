package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func smallTree(n int, size int64) []*file {
	root := &treeRoot{src: "/src", dst: "/dst"}
	fs := make([]*file, n)
	for i := range fs {
		name := fmt.Sprintf("d%d/f%d", i%3, i)
		fs[i] = &file{src: "/src/" + name, dst: "/dst/" + name, size: size, root: root}
	}
	return fs
}

func TestChooseTar(t *testing.T) {
	loose := []*file{{src: "/a", dst: "/b", size: 10}} // a single-file item: no tree
	for _, tc := range []struct {
		name     string
		mode     TarMode
		files    []*file
		src, dst bool
		mtime    bool
		use      bool
		why      string
	}{
		{"many small files", TarAuto, smallTree(2000, 50<<10), true, true, false, true, "2000 of 2000 files are smaller than 1024 KiB"},
		{"few small files", TarAuto, smallTree(tarMinFiles-1, 1<<10), true, true, false, false, ""},
		{"few, asked for", TarAlways, smallTree(3, 1<<10), true, true, false, true, "asked for"},
		{"large files", TarAuto, smallTree(100, 2<<20), true, true, false, false, ""},
		{"never", TarNever, smallTree(2000, 1), true, true, false, false, ""},
		{"source cannot", TarAuto, smallTree(2000, 1), false, true, false, false, ""},
		{"destination cannot, asked for", TarAlways, smallTree(2000, 1), true, false, false, false, "the destination offers no tar"},
		{"files of no tree", TarAlways, loose, true, true, false, false, ""},
		{"mtimes kept", TarAuto, smallTree(2000, 1), true, true, true, false, ""},
		{"mtimes kept, asked for", TarAlways, smallTree(2000, 1), true, true, true, false, "do not keep modification times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &copier{opts: Options{Tar: tc.mode, PreserveMtime: tc.mtime}, set: Settings{RTT: 30 * time.Millisecond},
				tarSrc: tarEnd{layer: tc.src}, tarDst: tarEnd{layer: tc.dst}}
			use, why := c.chooseTar(tc.files)
			if use != tc.use || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("chooseTar = %v, %q; want %v, %q", use, why, tc.use, tc.why)
			}
		})
	}
}

// TestTarStreams: over a WAN a batch moves on several streams, unless -p
// was given; on a LAN the plan's parallelism stays.
func TestTarStreams(t *testing.T) {
	lan, wan := 100*time.Microsecond, 61*time.Millisecond
	for _, tc := range []struct {
		name string
		o    Options
		s    Settings
		want int
		why  string
	}{
		{"WAN", Options{}, Settings{RTT: wan, Parallelism: 1}, wanTarStreams, "on 4 streams each over a wide-area link"},
		{"WAN, -p given", Options{Parallelism: 2}, Settings{RTT: wan, Parallelism: 2}, 2, ""},
		{"WAN, more streams already", Options{}, Settings{RTT: wan, Parallelism: 8}, 8, ""},
		{"LAN", Options{}, Settings{RTT: lan, Parallelism: 1}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, why := tarStreams(tc.o, tc.s)
			if p != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("tarStreams = %d, %q; want %d, %q", p, why, tc.want, tc.why)
			}
		})
	}
}

func TestBatches(t *testing.T) {
	big := &file{src: "/src/big", dst: "/dst/big", size: 5 << 20, root: &treeRoot{"/src", "/dst"}}
	for _, tc := range []struct {
		name          string
		files         []*file
		want          int
		batches, rest int
		largest       int
	}{
		{"split for the pairs", smallTree(100, 1<<10), 8, 8, 0, 13},
		{"four a pair for 8 pairs", smallTree(2000, 50<<10), batchesPerPair * 8, 32, 0, 63},
		{"fewer files than pairs", smallTree(3, 1<<10), 8, 3, 0, 1},
		{"member cap", smallTree(20000, 10), 2, 5, 0, 4000},
		{"byte cap", smallTree(1000, 1000<<10), 1, 16, 0, 63},
		{"a large file goes alone", append(smallTree(40, 1), big), 1, 1, 1, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, rest := (&copier{}).batches(tc.files, tc.want, tarMaxMembers)
			if len(bs) != tc.batches || len(rest) != tc.rest {
				t.Fatalf("%d batches, %d alone; want %d, %d", len(bs), len(rest), tc.batches, tc.rest)
			}
			largest, seen := 0, 0
			for _, b := range bs {
				largest = max(largest, len(b.files))
				seen += len(b.files)
				for _, f := range b.files {
					if got := b.rel(f); b.src+"/"+got != f.src || b.dst+"/"+got != f.dst {
						t.Errorf("%s in batch %s→%s as %q", f.src, b.src, b.dst, got)
					}
				}
			}
			if largest != tc.largest || seen+len(rest) != len(tc.files) {
				t.Errorf("largest batch %d, %d files in all; want %d, %d", largest, seen+len(rest), tc.largest, len(tc.files))
			}
		})
	}
}

// TestTarWindowBatches: the first window is cut into batchesPerPair
// batches a pair, so that the pairs that move fastest take more; later
// windows into one a pair, the queue of batches keeping every pair busy
// and fewer, larger batches costing less.
func TestTarWindowBatches(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, last bool
		batches     int
	}{
		{"first window", true, false, batchesPerPair * 8},
		{"the only window", true, true, batchesPerPair * 8},
		{"a later window", false, false, 8},
		{"the last window", false, true, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &copier{tarDecided: true, tarPer: tarMaxMembers}
			c.set.Concurrency = 8
			bs, rest := c.tarWindow(t.Context(), smallTree(4096, 10), tc.first, tc.last)
			if len(bs) != tc.batches || len(rest) != 0 {
				t.Errorf("%d batches, %d alone; want %d, 0", len(bs), len(rest), tc.batches)
			}
		})
	}
}

func TestPopenStacks(t *testing.T) {
	if got, want := popenPack("tar", "/data/src", []string{"a", "-b/c"}), "popen:argv=#tar#cf#-#-C#/data/src#./a#./-b/c"; got != want {
		t.Errorf("popenPack = %q, want %q", got, want)
	}
	if got, want := popenUnpack("/bin/tar", "/data/dst"), "popen:argv=#/bin/tar#xf#-#-C#/data/dst,ordering"; got != want {
		t.Errorf("popenUnpack = %q, want %q", got, want)
	}
	for name, want := range map[string]bool{"/a/b-c_d.e": true, "/a b": false, "/a#b": false, "/a,b": false,
		"/a;b": false, "/a%41": false, "/a=b": false, "/café": false, "/a\nb": false, "/a\x7f": false} {
		if got := popenSafe(name); got != want {
			t.Errorf("popenSafe(%q) = %v", name, got)
		}
	}
	// With a popen end, names it cannot take go one by one.
	c := &copier{tarSrc: tarEnd{popen: "tar"}, tarDst: tarEnd{layer: true}}
	fs := smallTree(4, 10)
	fs[1].src, fs[1].dst = "/src/a b", "/dst/a b"
	if bs, rest := c.batches(fs, 1, popenMaxMembers); len(bs) != 1 || len(bs[0].files) != 3 || len(rest) != 1 || rest[0] != fs[1] {
		t.Errorf("batches: %d batches, %d alone", len(bs), len(rest))
	}
}

func TestTreeRootUnder(t *testing.T) {
	for _, tc := range []struct {
		root     treeRoot
		src, dst string
		want     bool
	}{
		{treeRoot{"/a", "/b"}, "/a/x/y", "/b/x/y", true},
		{treeRoot{"/", "/b"}, "/x", "/b/x", true},
		{treeRoot{"/a", "/b"}, "/a/x", "/b/y", false},
		{treeRoot{"/a", "/b"}, "/ab/x", "/b/x", false},
	} {
		if got := tc.root.under(tc.src, tc.dst); got != tc.want {
			t.Errorf("%v.under(%s, %s) = %v", tc.root, tc.src, tc.dst, got)
		}
	}
}
