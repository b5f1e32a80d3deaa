package engine

import "time"

// wideArea is the round trip from which the link is treated as a WAN:
// more streams per file and more files in flight pay off there.
const wideArea = 5 * time.Millisecond

// tune chooses concurrency, parallelism, pipelining and chunk size from the
// file-size mix and the control channels' round trip, keeping what the
// options fix. Small files want many in flight (pipelining, sessions);
// large files want streams (parallelism) and, over a WAN, chunks that the
// optimizer can spread over more sessions while the rate rises.
func tune(o Options, files []*file, s Settings) Settings {
	var total, largest int64
	for _, f := range files {
		total += f.size
		largest = max(largest, f.size)
	}
	avg := int64(0)
	if len(files) > 0 {
		avg = total / int64(len(files))
	}
	wan := s.RTT >= wideArea
	const mib = 1 << 20
	switch {
	case avg < mib:
		s.Concurrency, s.Parallelism, s.Pipelining = 4, 1, 16
		if wan {
			s.Concurrency, s.Pipelining = 8, 32
		}
	case avg < 64*mib:
		s.Concurrency, s.Parallelism, s.Pipelining = 4, 1, 4
		if wan {
			s.Parallelism = 4
		}
	default:
		// On a LAN one stream per file runs as fast as the disks and
		// costs least CPU (20 × 100 MB on loopback: 0.82 s with -p 1,
		// 1.07 s with -p 2; bench/RESULTS.md).
		s.Concurrency, s.Parallelism, s.Pipelining = 2, 1, 2
		if wan {
			// Streams cost no logins; each pair costs its logins and a
			// congestion window's ramp, and may add nothing where one
			// pair's streams fill the link (bbr). So a pair per file,
			// up to 4, and the optimizer adds more while the rate rises.
			s.Concurrency, s.Parallelism = min(len(files), 4), 4
		}
	}
	s.ChunkSize = 0
	// Chunks spread a file over sessions: worth it over a WAN, where one
	// session's window may limit it and the optimizer needs units to hand
	// to the sessions it adds, or for files too large for one session to
	// finish soon; on a LAN one session's streams run as fast. The largest
	// file makes eight: one session runs them back to back (pipelined),
	// and there is room to spread them. On a LAN a large file with fewer
	// files than sessions is split too: there one receiving session's copy
	// into the page cache is the limit, and two share it (2 GiB on
	// loopback into tmpfs, median of 5: 1.50 s in one session, 1.22 s in
	// two with 256 MiB chunks; bench/RESULTS.md, issue 17).
	lone := len(files) < s.Concurrency
	if largest >= 512*mib && (wan || largest > 4096*mib || lone) {
		s.ChunkSize = max(64*mib, min(largest/8, 1024*mib))
	}
	if s.Live {
		// Live checksums need each stream's blocks in order: one stream
		// per transfer, and the parallelism comes from chunks instead.
		s.Concurrency = max(s.Concurrency, s.Parallelism*s.Concurrency/2)
		s.Parallelism = 1
		if largest >= 256*mib {
			s.ChunkSize = max(64*mib, min(largest/int64(2*s.Concurrency), 512*mib))
		}
	}
	if o.Concurrency > 0 {
		s.Concurrency = o.Concurrency
	}
	if o.Parallelism > 0 {
		s.Parallelism = o.Parallelism
	}
	if o.Pipelining > 0 {
		s.Pipelining = o.Pipelining
	}
	if o.ChunkSize != 0 {
		s.ChunkSize = max(o.ChunkSize, 0)
	}
	units := len(files)
	if s.ChunkSize > 0 {
		units += int(largest / s.ChunkSize)
	}
	s.Concurrency = max(1, min(s.Concurrency, units))
	return s
}

// Online tuning, after FTS3's optimizer: every interval the engine compares
// its throughput with the interval before. Rising by more than a step's
// worth adds a session pair (up to maxConcurrency); falling by a fifth or
// more takes one away (down to the starting number); anything else holds.
const (
	tuneGain = 1.05 // rate ratio that counts as rising
	tuneLoss = 0.80 // rate ratio that counts as falling
)

// tuneInterval is how often the optimizer looks: long enough for a new
// pair to ramp up over the link.
func tuneInterval(rtt time.Duration) time.Duration {
	return max(time.Second, 50*rtt)
}

// maxConcurrency bounds what the optimizer may add.
func maxConcurrency(s Settings) int {
	if s.RTT >= wideArea {
		return max(4*s.Concurrency, 32)
	}
	return 2 * s.Concurrency
}

// decide is one optimizer step: +1, -1 or 0 pairs.
func decide(prev, cur float64, pairs, floor, ceiling int) int {
	switch {
	case prev <= 0:
		return 0
	case cur > prev*tuneGain && pairs < ceiling:
		return 1
	case cur < prev*tuneLoss && pairs > floor:
		return -1
	}
	return 0
}
