//go:build interop

package interop

import (
	"path/filepath"
	"testing"
	"time"
)

// TestWindowBlocksToGCT: a ferry source on another host (a namespace
// behind a veth) sends blocks sized to each stream's congestion window,
// which starts at the initial window of 10 segments; GCT takes those
// blocks, over 4 streams, and the copy arrives whole with both ends'
// MD5 agreeing. A ferry server receives them as well.
func TestWindowBlocksToGCT(t *testing.T) {
	o := newOverlay(t)
	src := serveIn(t, o.head, "10.203.1.2", "2811")
	gct := startGCTServer(t, "-data-interface", "10.203.1.1")
	ferry := serveIn(t, "", "10.203.1.1", freePortOn(t, "10.203.1.1"))
	writeRandomFile(t, filepath.Join(src.root, "w.bin"), 48<<20+3)
	for _, dst := range []struct{ name, url, path string }{
		{"gct", gct.URL("w.bin"), gct.Path("w.bin")},
		{"ferry", ferry.URL("w.bin"), filepath.Join(ferry.root, "w.bin")},
	} {
		t.Run(dst.name, func(t *testing.T) {
			r := runFerryCLI(t, 2*time.Minute, nil, "", "copy", "-p", "4", "--verify-checksum", "--checksum-algorithm", "MD5", "-q",
				src.URL("w.bin"), dst.url)
			if r.code != 0 {
				t.Fatalf("%s\n%s%s", r, r.stdout, r.stderr)
			}
			if err := compareFiles(filepath.Join(src.root, "w.bin"), dst.path); err != nil {
				t.Fatal(err)
			}
		})
	}
}
