//go:build interop

package interop

// What an interrupted `ferry copy` leaves at a destination, ferry's server
// or GCT's: no file short of its data ever bears its final name, and the
// same command again (with a sync level) finishes the job from what was
// left, byte for byte, without sending again what had arrived.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/internal/partname"
)

// finalWatch looks at a destination tree's files under their final names
// while a copy runs: each one must be whole and equal to its source.
type finalWatch struct {
	src, dst string   // the trees' local paths
	names    []string // the files, relative
	sizes    map[string]int64
	equal    map[string]bool // seen whole and compared
}

// look checks every file present under its final name; it returns how many
// are there, whole.
func (w *finalWatch) look(t *testing.T) int {
	t.Helper()
	n := 0
	for _, rel := range w.names {
		st, err := os.Stat(filepath.Join(w.dst, rel))
		if err != nil {
			continue
		}
		if st.Size() != w.sizes[rel] {
			t.Fatalf("%s is under its final name with %d bytes of %d", rel, st.Size(), w.sizes[rel])
		}
		if !w.equal[rel] {
			if err := compareFiles(filepath.Join(w.src, rel), filepath.Join(w.dst, rel)); err != nil {
				t.Fatalf("under its final name before it is whole: %v", err)
			}
			w.equal[rel] = true
		}
		n++
	}
	return n
}

// TestCopyKilledResumes: `ferry copy -r` of a tree with a chunked file is
// killed (SIGKILL) at a seeded random point of the large file's arrival
// (and once when all of it has arrived), to ferry's server and to GCT's.
// While it runs, and after, every file under its final name is whole and
// equal to its source; then the same command with -s size or -s exists
// leaves the tree byte-equal to its source with no temporary file, sends
// none of the files that had arrived again, and resumes the large one.
func TestCopyKilledResumes(t *testing.T) {
	needTools(t)
	const size, chunk, small = 96 << 20, 8 << 20, 12
	for _, dstKind := range []struct {
		name  string
		start starter
	}{{"ferry", shmFerry}, {"gct", startGCT}} {
		t.Run(dstKind.name, func(t *testing.T) {
			src := shmFerry(t)
			w := &finalWatch{src: src.Path("d"), sizes: map[string]int64{}}
			writeRandomFile(t, src.Path("d/big"), size)
			w.names, w.sizes["big"] = append(w.names, "big"), size
			for i := range small {
				rel := fmt.Sprintf("s%02d", i)
				writeRandomFile(t, src.Path("d/"+rel), int64(1000+i*7919))
				w.names, w.sizes[rel] = append(w.names, rel), int64(1000+i*7919)
			}
			killed := 0
			for _, seed := range []uint64{1, 2, 3, 0} {
				frac := 1.0 // seed 0: once all of it arrived
				if seed != 0 {
					frac = 0.05 + 0.9*rand.New(rand.NewPCG(seed, 30)).Float64()
				}
				t.Run(fmt.Sprintf("seed %d at %.0f%%", seed, 100*frac), func(t *testing.T) {
					dst := dstKind.start(t)
					w.dst, w.equal = dst.Path("d"), map[string]bool{}
					args := []string{"copy", "-q", "-r", "--chunk-size", strconv.Itoa(chunk), "-cc", "3", src.URL("d"), dst.URL("d")}
					var out logBuffer
					p, err := startProc(ferryBin, args, &out)
					if err != nil {
						t.Fatal(err)
					}
					tmp := filepath.Join(dst.Path("d"), partname.For("big"))
					deadline := time.Now().Add(60 * time.Second)
					for !p.exited() && dirAllocated(dst.Path("")) < int64(frac*float64(size)) {
						w.look(t)
						if time.Now().After(deadline) {
							t.Fatalf("%d MiB arrived within 60s:\n%s", dirAllocated(dst.Path(""))>>20, out.String())
						}
						time.Sleep(time.Millisecond)
					}
					if !p.exited() {
						p.signalGroup(syscall.SIGKILL)
						killed++
					}
					p.wait(10 * time.Second)
					whole := w.look(t)
					left, arrived := "none", int64(0)
					if st, err := os.Stat(tmp); err == nil {
						arrived = st.Sys().(*syscall.Stat_t).Blocks * 512
						left = fmt.Sprintf("%d MiB, %d MiB of it written", st.Size()>>20, arrived>>20)
					}
					t.Logf("killed at %d MiB: %d files whole under their names, big's temporary file: %s",
						dirAllocated(dst.Path(""))>>20, whole, left)

					level := []string{"size", "exists"}[seed%2]
					r := mustCopy(t, "-r", "-s", level, "--chunk-size", strconv.Itoa(chunk), src.URL("d"), dst.URL("d"))
					if err := compareTrees(src.Path("d"), dst.Path("d")); err != nil {
						t.Fatalf("after the second copy: %v", err)
					}
					m := summaryRE.FindStringSubmatch(r.stderr)
					if m == nil {
						t.Fatalf("no summary:\n%s", r)
					}
					if skipped, _ := strconv.Atoi(m[3]); skipped < whole {
						t.Errorf("%d files were whole under their names, %d skipped: whole files sent again", whole, skipped)
					}
					if !strings.Contains(r.stderr, " 0 failed") {
						t.Errorf("second copy:\n%s", r)
					}
					// What had arrived of big goes no more, but for the
					// chunks in flight at the kill (written in part).
					if moved, limit := movedBytes(t, r), size-arrived+3*2*chunk; moved > limit {
						t.Errorf("second copy moved %d MiB, more than the %d MiB missing and the chunks in flight", moved>>20, (size-arrived)>>20)
					}
				})
			}
			if killed == 0 {
				t.Fatal("every copy ended before it could be killed")
			}
		})
	}
}

// movedRE is the bytes a summary line says moved.
var movedRE = regexp.MustCompile(`failed; ([0-9.]+) ([KMGT]?i?B) in `)

// movedBytes reads, about, the bytes a ferry copy's summary says it moved.
func movedBytes(t *testing.T, r cliRun) int64 {
	t.Helper()
	m := movedRE.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no bytes in the summary:\n%s", r)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	unit := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	return int64(v * unit)
}

// TestCopyInterruptedSync: `ferry copy` interrupted (SIGINT) while a large
// file arrives says which partial file it kept and that the same command
// resumes it; written in place (--inplace), the short file under its
// final name is newer than its source, yet the same command with -s mtime
// or -s exists copies it again: no sync level skips a file of another
// size than its source's. To ferry's server and GCT's.
func TestCopyInterruptedSync(t *testing.T) {
	needTools(t)
	const size = 96 << 20
	for _, dstKind := range []struct {
		name  string
		start starter
	}{{"ferry", shmFerry}, {"gct", startGCT}} {
		for _, tc := range []struct {
			level   string
			inPlace bool
		}{{"mtime", false}, {"exists", false}, {"mtime", true}, {"exists", true}} {
			name := fmt.Sprintf("%s -s %s", dstKind.name, tc.level)
			if tc.inPlace {
				name += " --inplace"
			}
			t.Run(name, func(t *testing.T) {
				src := shmFerry(t)
				dst := dstKind.start(t)
				writeRandomFile(t, src.Path("d/big"), size)
				flags := []string{"-r", "--chunk-size", "0", "-cc", "1", "-p", "1"}
				if tc.inPlace {
					flags = append(flags, "--inplace")
				}
				var out logBuffer
				p, err := startProc(ferryBin, append(append([]string{"copy", "-q"}, flags...), src.URL("d"), dst.URL("d")), &out)
				if err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(60 * time.Second)
				for !p.exited() && dirAllocated(dst.Path("")) < size/3 {
					if time.Now().After(deadline) {
						t.Fatalf("%d MiB arrived within 60s:\n%s", dirAllocated(dst.Path(""))>>20, out.String())
					}
					time.Sleep(time.Millisecond)
				}
				if p.exited() {
					t.Fatalf("the copy ended before it could be interrupted:\n%s", out.String())
				}
				p.signalGroup(syscall.SIGINT)
				if !p.wait(30 * time.Second) {
					t.Fatalf("ferry copy still runs 30s after SIGINT:\n%s", out.String())
				}
				if st, err := os.Stat(dst.Path("d/big")); tc.inPlace {
					if err != nil || st.Size() >= size {
						t.Fatalf("in place: want a short file under the final name: %v", err)
					}
					later := time.Now().Add(time.Hour)
					os.Chtimes(dst.Path("d/big"), later, later) // newer than the source, whatever the clocks
				} else {
					if err == nil {
						t.Fatalf("the interrupted file bears its final name (%d bytes)", st.Size())
					}
					if !strings.Contains(out.String(), "1 partial file kept as .ferry-*.part; run the same command again to resume") {
						t.Errorf("the interrupted copy does not say what it kept:\n%s", out.String())
					}
				}
				r := mustCopy(t, append(append([]string{"-s", tc.level}, flags...), src.URL("d"), dst.URL("d"))...)
				checkSummary(t, r, 1, 1, 0)
				if err := compareTrees(src.Path("d"), dst.Path("d")); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
