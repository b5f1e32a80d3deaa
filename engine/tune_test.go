package engine

import (
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
	files := func(n int, size int64) []*file {
		var fs []*file
		for range n {
			fs = append(fs, &file{size: size})
		}
		return fs
	}
	lan, wan := Settings{RTT: 100 * time.Microsecond}, Settings{RTT: 60 * time.Millisecond}
	for _, tc := range []struct {
		name  string
		o     Options
		files []*file
		in    Settings
		want  Settings
	}{
		{"small files, LAN", Options{}, files(5000, 50_000), lan, Settings{Concurrency: 4, Parallelism: 1, Pipelining: 16, RTT: lan.RTT}},
		{"small files, WAN", Options{}, files(5000, 50_000), wan, Settings{Concurrency: 8, Parallelism: 1, Pipelining: 32, RTT: wan.RTT}},
		{"medium files, WAN", Options{}, files(20, 100*mib), wan, Settings{Concurrency: 4, Parallelism: 4, Pipelining: 2, RTT: wan.RTT}},
		// On a LAN a lone large file is split over the two sessions: one
		// receiving session's copy into the page cache is the limit.
		{"one large file, LAN: two sessions, chunks", Options{}, files(1, 2048*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 256 * mib, RTT: lan.RTT}},
		{"two large files, LAN: a session each, no chunks", Options{}, files(2, 2048*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, RTT: lan.RTT}},
		{"one 256 MiB file, LAN: no chunks", Options{}, files(1, 256*mib), lan, Settings{Concurrency: 1, Parallelism: 1, Pipelining: 2, RTT: lan.RTT}},
		{"one huge file, LAN", Options{}, files(1, 8192*mib), lan, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 1024 * mib, RTT: lan.RTT}},
		// Over a WAN a large file starts on one pair, in chunks that the
		// optimizer can hand to the pairs it adds while the rate rises.
		{"one large file, WAN: one pair, chunks", Options{}, files(1, 2048*mib), wan, Settings{Concurrency: 1, Parallelism: 4, Pipelining: 2, ChunkSize: 256 * mib, RTT: wan.RTT}},
		{"one 512 MiB file, WAN", Options{}, files(1, 512*mib), wan, Settings{Concurrency: 1, Parallelism: 4, Pipelining: 2, ChunkSize: 64 * mib, RTT: wan.RTT}},
		{"two large files, WAN: a pair each", Options{}, files(2, 1024*mib), wan, Settings{Concurrency: 2, Parallelism: 4, Pipelining: 2, ChunkSize: 128 * mib, RTT: wan.RTT}},
		{"live checksums: chunks, one stream each", Options{}, files(1, 2048*mib), Settings{RTT: lan.RTT, Live: true}, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 512 * mib, RTT: lan.RTT, Live: true}},
		{"live checksums, 512 MiB, LAN", Options{}, files(1, 512*mib), Settings{RTT: lan.RTT, Live: true}, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 128 * mib, RTT: lan.RTT, Live: true}},
		{"live checksums, 512 MiB, WAN: as on a LAN", Options{}, files(1, 512*mib), Settings{RTT: wan.RTT, Live: true}, Settings{Concurrency: 2, Parallelism: 1, Pipelining: 2, ChunkSize: 128 * mib, RTT: wan.RTT, Live: true}},
		{"one small file: one pair", Options{}, files(1, 10), lan, Settings{Concurrency: 1, Parallelism: 1, Pipelining: 16, RTT: lan.RTT}},
		{"options win", Options{Concurrency: 3, Parallelism: 5, Pipelining: 7, ChunkSize: -1}, files(1, 4096*mib), lan, Settings{Concurrency: 1, Parallelism: 5, Pipelining: 7, RTT: lan.RTT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tune(tc.o, tc.files, tc.in); got != tc.want {
				t.Fatalf("tune = %+v, want %+v", got, tc.want)
			}
		})
	}
}
