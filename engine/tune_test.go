package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		prev, cur             float64
		pairs, floor, ceiling int
		want                  int
	}{
		{"first look", 0, 100, 4, 4, 8, 0},
		{"rising", 100, 110, 4, 4, 8, 1},
		{"rising at the ceiling", 100, 200, 8, 4, 8, 0},
		{"flat", 100, 103, 5, 4, 8, 0},
		{"small dip holds", 100, 85, 5, 4, 8, 0},
		{"falling", 100, 70, 5, 4, 8, -1},
		{"falling at the floor", 100, 10, 4, 4, 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.prev, tc.cur, tc.pairs, tc.floor, tc.ceiling); got != tc.want {
				t.Fatalf("decide(%v, %v, %d, %d, %d) = %d, want %d", tc.prev, tc.cur, tc.pairs, tc.floor, tc.ceiling, got, tc.want)
			}
		})
	}
}

func TestTune(t *testing.T) {
	const mib = 1 << 20
	lan, wan := Settings{RTT: 100 * time.Microsecond}, Settings{RTT: 60 * time.Millisecond}
	for _, tc := range []struct {
		name  string
		o     Options
		files []*file
		in    Settings
		want  Settings
	}{
		{"small files, LAN", Options{}, sameFiles(5000, 50_000), lan, Settings{Concurrency: 4, Parallelism: 1, Pipelining: 16, RTT: lan.RTT}},
		{"small files, WAN", Options{}, sameFiles(5000, 50_000), wan, Settings{Concurrency: 8, Parallelism: 1, Pipelining: 32, RTT: wan.RTT}},
		{"100 MiB files, WAN: 4 pairs of 8 streams", Options{}, sameFiles(20, 100*mib), wan, Settings{Concurrency: 4, Parallelism: 8, Pipelining: 2, RTT: wan.RTT}},
		// On a LAN a lone large file is split over the two sessions: one
		// receiving session's copy into the page cache is the limit.
		{"one large file, LAN: two sessions, chunks", Options{}, sameFiles(1, 2048*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 256 * mib, RTT: lan.RTT}},
		{"two large files, LAN: a session each, no chunks", Options{}, sameFiles(2, 2048*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, RTT: lan.RTT}},
		{"one 256 MiB file, LAN: no chunks", Options{}, sameFiles(1, 256*mib), lan, Settings{Concurrency: 1, Parallelism: 1, Pipelining: 2, RTT: lan.RTT}},
		{"one huge file, LAN", Options{}, sameFiles(1, 8192*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 1024 * mib, RTT: lan.RTT}},
		// Over a WAN a large file is one transfer over 16 streams.
		{"one large file, WAN: one pair, no chunks", Options{}, sameFiles(1, 2048*mib), wan, Settings{Concurrency: 1, Parallelism: 16, Pipelining: 2, RTT: wan.RTT}},
		{"one 512 MiB file, WAN", Options{}, sameFiles(1, 512*mib), wan, Settings{Concurrency: 1, Parallelism: 16, Pipelining: 2, RTT: wan.RTT}},
		{"two large files, WAN: a pair each, 32 streams in all", Options{}, sameFiles(2, 1024*mib), wan, Settings{Concurrency: 2, Parallelism: 16, Pipelining: 2, RTT: wan.RTT}},
		// Live checksums keep the plan: the ends hash on every stream.
		{"live checksums, LAN", Options{}, sameFiles(1, 2048*mib), Settings{RTT: lan.RTT, Live: true}, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 256 * mib, RTT: lan.RTT, Live: true}},
		{"live checksums, 512 MiB, WAN: 16 streams", Options{}, sameFiles(1, 512*mib), Settings{RTT: wan.RTT, Live: true}, Settings{Concurrency: 1, Parallelism: 16, Pipelining: 2, RTT: wan.RTT, Live: true}},
		{"one small file: one pair", Options{}, sameFiles(1, 10), lan, Settings{Concurrency: 1, Parallelism: 1, Pipelining: 16, RTT: lan.RTT}},
		{"options win", Options{Concurrency: 3, Parallelism: 5, Pipelining: 7, ChunkSize: -1}, sameFiles(1, 4096*mib), lan, Settings{Concurrency: 1, Parallelism: 5, Pipelining: 7, RTT: lan.RTT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tune(tc.o, tc.files, tc.in, false)
			if got.Why == "" {
				t.Error("tune gave no reason")
			}
			if got.Why = ""; got != tc.want {
				t.Fatalf("tune = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTuneWhy: the reasons name what decided the settings.
func TestTuneWhy(t *testing.T) {
	const mib = 1 << 20
	lan, wan := Settings{RTT: 100 * time.Microsecond, RTTSamples: 2}, Settings{RTT: 61 * time.Millisecond, RTTSamples: 4}
	for _, tc := range []struct {
		name  string
		o     Options
		files []*file
		in    Settings
		want  []string
	}{
		{"small files, WAN", Options{}, sameFiles(2000, 50_000), wan, []string{"2000 files averaging 48.8 KiB", "wide-area link (round trip 61ms, the least of 4 samples)", "small files: many in flight", "up to 32"}},
		{"large file, WAN", Options{}, sameFiles(1, 512*mib), wan, []string{"large files over a wide-area link", "up to 4, with 16 streams each, 16 in all"}},
		{"huge file, WAN", Options{}, sameFiles(1, 8192*mib), wan, []string{"chunks of 1.0 GiB, so that the largest file can be spread"}},
		{"four large files, WAN", Options{}, sameFiles(4, 512*mib), wan, []string{"with 8 streams each, 32 in all"}},
		{"nothing to move", Options{}, nil, wan, []string{"no file to move, over a wide-area link"}},
		{"one small file", Options{}, sameFiles(1, 10), lan, []string{"1 file averaging 10 B", "no more session pairs than there are files and chunks (1)"}},
		{"large file, LAN", Options{}, sameFiles(1, 2048*mib), lan, []string{"local link (round trip 100µs, the least of 2 samples, under 5ms)", "one stream per file", "one receiving session's copy into memory is the limit"}},
		{"live checksums", Options{}, sameFiles(1, 2048*mib), Settings{RTT: lan.RTT, Live: true}, []string{"checksums computed as the data moves, on every stream"}},
		{"options", Options{Parallelism: 8, ChunkSize: -1}, sameFiles(10, 20*mib), wan, []string{"medium files", "-p 8, --chunk-size 0 (no chunks) as given"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := tune(tc.o, tc.files, tc.in, false).Why
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("why %q: want %q in it", why, w)
				}
			}
		})
	}
}

func TestTuneNote(t *testing.T) {
	for _, tc := range []struct {
		from, to  int
		prev, cur float64
		want      string
	}{
		{4, 5, 70 << 20, 85 << 20, "4 → 5 session pairs: the rate rose from 70.0 MiB/s to 85.0 MiB/s"},
		{6, 5, 100 << 20, 50 << 20, "6 → 5 session pairs: the rate fell from 100.0 MiB/s to 50.0 MiB/s"},
	} {
		if got := TuneNote(tc.from, tc.to, tc.prev, tc.cur); got != tc.want {
			t.Errorf("TuneNote(%d, %d, %v, %v) = %q, want %q", tc.from, tc.to, tc.prev, tc.cur, got, tc.want)
		}
	}
}

// sameFiles are n files of size bytes.
func sameFiles(n int, size int64) []*file {
	var fs []*file
	for range n {
		fs = append(fs, &file{size: size})
	}
	return fs
}

// TestGrowTo: over a WAN between ferry servers a pair's source may grow
// its streams, to 64 in all over the pairs; not with -p, not on a LAN,
// not when an end does not offer it, not for a fan-out.
func TestGrowTo(t *testing.T) {
	lan, wan := 100*time.Microsecond, 61*time.Millisecond
	for _, tc := range []struct {
		name  string
		o     Options
		s     Settings
		limit int // the ends' FEAT STREAMGROW, the lower; 0: not offered
		want  int
	}{
		{"one large file", Options{}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 64, 64},
		{"four pairs", Options{}, Settings{RTT: wan, Concurrency: 4, Parallelism: 8}, 64, 16},
		{"small files", Options{}, Settings{RTT: wan, Concurrency: 8, Parallelism: 4}, 64, 8},
		{"an end takes 24 streams at most", Options{}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 24, 24},
		{"an end takes fewer than planned", Options{}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 8, 0},
		{"not offered", Options{}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 0, 0},
		{"-p given", Options{Parallelism: 16}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 64, 0},
		{"LAN", Options{}, Settings{RTT: lan, Concurrency: 2, Parallelism: 1}, 64, 0},
		{"as many as the share already", Options{}, Settings{RTT: wan, Concurrency: 4, Parallelism: 16}, 64, 0},
		{"fan-out", Options{fan: &fanout{}}, Settings{RTT: wan, Concurrency: 1, Parallelism: 16}, 64, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := growTo(tc.o, tc.s, tc.limit)
			if got != tc.want || (got > 0) != strings.Contains(why, fmt.Sprintf("up to %d a pair", got)) {
				t.Errorf("growTo = %d, %q; want %d", got, why, tc.want)
			}
		})
	}
}
