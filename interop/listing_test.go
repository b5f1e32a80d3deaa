//go:build interop

package interop

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestFerryHugeListing: a directory of 30,000 entries on a ferry server,
// which writes a listing as it reads the directory (in readdir order),
// lists every entry exactly once to globus-url-copy -list and to gfal-ls.
func TestFerryHugeListing(t *testing.T) {
	needTools(t, "gfal-ls")
	srv := startFerry(t)
	const many = 30000
	if err := os.Mkdir(srv.Path("huge"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i := range many {
		name := fmt.Sprintf("entry-%05d", i)
		want[name] = true
		if err := os.WriteFile(srv.Path("huge/"+name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		skip int // lines before the names
	}{
		{"globus-url-copy", []string{"-list", srv.URL("huge/")}, 1},
		{"gfal-ls", []string{srv.URL("huge/")}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := mustRun(t, c.name, c.args...)
			got := map[string]int{}
			for i, l := range strings.Split(out, "\n") {
				if l = strings.TrimSpace(l); i >= c.skip && l != "" {
					got[l]++
				}
			}
			for name, n := range got {
				if n != 1 || !want[name] {
					t.Errorf("%q listed %d times", name, n)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d names listed, want %d", len(got), len(want))
			}
		})
	}
}
