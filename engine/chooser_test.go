package engine

import (
	"strings"
	"testing"
	"time"
)

// TestChooser: with two ways open, the first large file tries the first
// way, the next (held until then) the second, and the rest go the way
// whose trial delivered faster; a failed trial counts as the slowest.
func TestChooser(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ways       []Way
		took       []time.Duration // per trial; 0: failed
		want       Way
		chosenNote string
	}{
		{"striped faster", []Way{WayStriped, WaySpread}, []time.Duration{time.Second, 2 * time.Second}, WayStriped, "chosen: striped 64.0 MB/s, spread 32.0 MB/s"},
		{"spread faster", []Way{WayStriped, WaySpread}, []time.Duration{2 * time.Second, time.Second}, WaySpread, "chosen: striped 32.0 MB/s, spread 64.0 MB/s"},
		{"striped failed", []Way{WayStriped, WaySpread}, []time.Duration{0, 4 * time.Second}, WaySpread, "chosen: striped 0.0 MB/s, spread 16.0 MB/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := newChooser(tc.ways)
			now := time.Now()
			ch.now = func() time.Time { return now } // trials take exactly tc.took
			files := make([]*file, 4)
			for i := range files {
				files[i] = &file{src: string(rune('a' + i)), size: 64e6}
			}
			if w, held := ch.assign(files[0]); held || w != tc.ways[0] {
				t.Fatalf("first file: %s, held %v", w, held)
			}
			for _, f := range files[1:] {
				if _, held := ch.assign(f); !held {
					t.Fatalf("file %s not held during the trials", f.src)
				}
			}
			end := func(i int) ([]release, Way, string) {
				ch.mu.Lock()
				ch.trials[i].start = now.Add(-tc.took[i])
				ch.mu.Unlock()
				return ch.ended(files[i], tc.took[i] > 0)
			}
			out, w, note := end(0)
			if len(out) != 1 || out[0].f != files[1] || out[0].way != tc.ways[1] || w != tc.ways[1] || !strings.HasPrefix(note, "trying "+tc.ways[1].String()+" on b (") {
				t.Fatalf("after the first trial: %v %s %q", out, w, note)
			}
			if ch.decided() {
				t.Fatal("decided after one trial")
			}
			out, w, note = end(1)
			if w != tc.want || note != tc.chosenNote || len(out) != 2 || out[0].way != tc.want || out[1].way != tc.want {
				t.Fatalf("choice: %v %s %q; want %s, %q", out, w, note, tc.want, tc.chosenNote)
			}
			if w, held := ch.assign(&file{}); held || w != tc.want {
				t.Errorf("a file after the choice: %s, held %v", w, held)
			}
			if out, _, note := ch.ended(files[2], true); out != nil || note != "" {
				t.Errorf("a file after the choice ended: %v %q", out, note)
			}
		})
	}
}

func TestSpreadChunk(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		size int64
		n    int
		want int64
	}{
		{64 * mib, 2, 16 * mib},
		{64 * mib, 8, 8 * mib}, // never under 8 MiB
		{1000 * mib, 3, 167 * mib},
		{100*mib + 4, 2, 26 * mib}, // rounded up to whole MiB
	} {
		if got := spreadChunk(tc.size, tc.n); got != tc.want {
			t.Errorf("spreadChunk(%d, %d) = %d MiB, want %d MiB", tc.size, tc.n, got/mib, tc.want/mib)
		}
	}
}
