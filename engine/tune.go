package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"ferry/gridftp/client"
	"ferry/internal/plural"
)

// tune chooses concurrency, parallelism, pipelining and chunk size from the
// file-size mix and the control channels' round trip, keeping what the
// options fix. Small files want many in flight (pipelining, sessions);
// large files want streams (parallelism) and, over a WAN, chunks that the
// optimizer can spread over more sessions while the rate rises. files are
// the first window of the plan; more says that more may come, so their
// number does not cap the session pairs.
func tune(o Options, files []*file, s Settings, more bool) Settings {
	var total, largest int64
	for _, f := range files {
		total += f.size
		largest = max(largest, f.size)
	}
	avg := int64(0)
	if len(files) > 0 {
		avg = total / int64(len(files))
	}
	wan, link := s.wan(), linkNote(s)
	why := []string{fmt.Sprintf("%s averaging %s, the largest %s, over %s", plural.Count(len(files), "file"), plural.Bytes(avg), plural.Bytes(largest), link)}
	if len(files) == 0 {
		why[0] = "no file to move, over " + link
	}
	const mib = 1 << 20
	switch {
	case avg < mib:
		s.Concurrency, s.Parallelism, s.Pipelining = 4, 1, 16
		why = append(why, "small files: many in flight on each session pair (pipelining), one stream per file")
		if wan {
			s.Concurrency, s.Pipelining = 8, 32
		}
	case avg < 64*mib:
		s.Concurrency, s.Parallelism, s.Pipelining = 4, 1, 4
		why = append(why, "medium files: several session pairs, a few files in flight on each")
		if wan {
			s.Parallelism = 4
			why = append(why, "4 streams per file to fill a long window")
		}
	default:
		// On a LAN one stream per file runs as fast as the disks and
		// costs least CPU (20 × 100 MB on loopback: 0.82 s with -p 1,
		// 1.07 s with -p 2; bench/LOG.md).
		s.Concurrency, s.Parallelism, s.Pipelining = 2, 1, 2
		why = append(why, "large files on a local link: one stream per file runs as fast as the disks and costs least CPU")
		if wan {
			// Streams cost no logins; each pair costs its logins and a
			// congestion window's ramp, and may add nothing where one
			// pair's streams fill the link (bbr). So a pair per file,
			// up to 4, and the optimizer adds more while the rate rises.
			// The streams of all pairs together are 16: with loss, a
			// loss-based congestion control (cubic) caps each stream
			// far below the link (Mathis), so only more streams fill
			// it; bbr fills it with any number (bench/LOG.md, issue
			// 17: 60 ms, 0.01 %, cubic: -p 4 20.6 s, -p 16 8.9 s).
			// Several files get 32 in all: 10 × 100 MB over 4 pairs, 4
			// and 8 streams each, mean of 2: 60 ms, 0.1 %, cubic 76.3
			// against 40.8 s; 0.01 %, cubic 16.3 against 13.5 s; 60 ms,
			// bbr 9.7 against 10.3 s; 20 ms, no loss, cubic 9.8 against
			// 9.0 s.
			streams := 16
			if len(files) > 1 {
				streams = 32
			}
			s.Concurrency = min(len(files), 4)
			s.Parallelism = max(4, streams/max(s.Concurrency, 1))
			why[len(why)-1] = fmt.Sprintf("large files over a wide-area link: a session pair per file, up to 4, with %d streams each, %d in all: "+
				"over a lossy path each stream's window stays small (cubic), and more streams fill the link", s.Parallelism, s.Parallelism*s.Concurrency)
		}
	}
	s.ChunkSize = 0
	// Chunks spread a file over sessions: worth it for files too large
	// for one session to finish soon. The largest file makes eight: one
	// session runs them back to back (pipelined), and there is room to
	// spread them. On a LAN a large file with fewer
	// files than sessions is split too: there one receiving session's copy
	// into the page cache is the limit, and two share it (2 GiB on
	// loopback into tmpfs, median of 5: 1.50 s in one session, 1.22 s in
	// two with 256 MiB chunks; bench/LOG.md, issue 17).
	// Over a WAN a file up to 4 GiB is one transfer over its 16 streams:
	// chunks there end each in a wait for the slowest stream, which loss
	// makes long (one 512 MiB file, 16 streams, median of 2: 60 ms, 0.01
	// %, bbr 5.4 s in one, 5.6 s in 64 MiB chunks; 150 ms, cubic 7.5 s
	// against 10.4 s; 20 ms, 0.1 %, cubic 14.1 s against 16.3 s).
	lone := !more && len(files) < s.Concurrency && !wan
	if largest >= 512*mib && (largest > 4096*mib || lone) {
		s.ChunkSize = max(64*mib, min(largest/8, 1024*mib))
		reason := "so that the largest file can be spread over the session pairs the optimizer adds"
		if lone {
			reason = "so that a lone large file is spread over the sessions: on a local link one receiving session's copy into memory is the limit"
		}
		why = append(why, fmt.Sprintf("chunks of %s, %s", plural.Bytes(s.ChunkSize), reason))
	}
	if s.Live {
		// The ends hash on every stream: the sender reads its blocks in
		// order, the receiver hashes blocks that came early once the gap
		// before them is filled (gridftp.Receiver), so live checksums keep
		// the plan (one 512 MiB file, 60 ms, 0.01 %, cubic: 27.3 s over
		// 8 single-stream pairs, 8.5 s unverified over 16 streams).
		why = append(why, "checksums computed as the data moves, on every stream")
	}
	var given []string
	if o.Concurrency > 0 {
		s.Concurrency = o.Concurrency
		given = append(given, fmt.Sprintf("--cc %d", o.Concurrency))
	}
	if o.Parallelism > 0 {
		s.Parallelism = o.Parallelism
		given = append(given, fmt.Sprintf("-p %d", o.Parallelism))
	}
	if o.Pipelining > 0 {
		s.Pipelining = o.Pipelining
		given = append(given, fmt.Sprintf("--pp %d", o.Pipelining))
	}
	if o.ChunkSize != 0 {
		s.ChunkSize = max(o.ChunkSize, 0)
		chunks := "0 (no chunks)"
		if s.ChunkSize > 0 {
			chunks = plural.Bytes(s.ChunkSize)
		}
		given = append(given, "--chunk-size "+chunks)
	}
	if len(given) > 0 {
		why = append(why, strings.Join(given, ", ")+" as given")
	}
	units := len(files)
	if s.ChunkSize > 0 {
		units += int(largest / s.ChunkSize)
	}
	if more {
		why[0] = "the first " + why[0]
	} else {
		if units < s.Concurrency {
			why = append(why, fmt.Sprintf("no more session pairs than there are files and chunks (%d)", max(1, units)))
		}
		s.Concurrency = max(1, min(s.Concurrency, units))
	}
	why = append(why, fmt.Sprintf("then every %v the optimizer adds a session pair while the rate rises by %.0f %% (up to %d) and takes one away when it falls by %.0f %%",
		tuneInterval(s.RTT).Round(100*time.Millisecond), (tuneGain-1)*100, maxConcurrency(s), (1-tuneLoss)*100))
	s.Why = strings.Join(why, "; ")
	return s
}

// growStreams is how many streams in all the sources of a copy over a WAN
// may grow to while transfers run (gridftp.Growth): 64 a pair for one,
// shared by more; a ferry server receives 64 at most.
const growStreams = 64

// planGrowth lets the sources add streams while a transfer runs, as long
// as they raise its rate (growTo), recording it in the settings.
func (c *copier) planGrowth() {
	p := c.listing
	if p == nil {
		return
	}
	if most, why := growTo(c.opts, c.set, min(growLimit(p.Src), growLimit(p.Dst))); most > 0 {
		c.set.MaxParallel = most
		c.set.Why += "; " + why
	}
}

// growLimit is the most streams a server takes in one transfer when it
// offers growth (FEAT STREAMGROW N); 0 when it does not.
func growLimit(c *client.Conn) int {
	params, ok := c.Feature("STREAMGROW")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(params))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// growTo is how many streams a pair's source may grow to, and why (0:
// none): over a WAN, between ferry servers that both offer growth, at
// most limit (the fewer streams of the two), unless -p fixes the streams
// or the copy fans out. Over a lossy path a loss-based
// congestion control (cubic) keeps each stream's window small, and the
// rate grows with the number of streams well past 16 (150 ms, 0.1 %:
// bench/LOG.md, issue 17); no plan made before the data moves can
// tell such a path from one that the streams already fill.
func growTo(o Options, s Settings, limit int) (int, string) {
	if limit <= 0 || o.Parallelism > 0 || !s.wan() || o.fan != nil {
		return 0, ""
	}
	most := min(max(s.Parallelism, growStreams/max(s.Concurrency, 1)), limit)
	if most <= s.Parallelism {
		return 0, ""
	}
	return most, fmt.Sprintf("both ends are ferry servers, so a source adds streams while a transfer runs, up to %d a pair, "+
		"as long as they raise the rate (over a lossy path a loss-based congestion control keeps each stream's window small; not under bbr)", most)
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
	if s.wan() {
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

// TuneNote says an optimizer step (Tuner.Tuned) in words: "4 → 5 session
// pairs: the rate rose from 70.1 MiB/s to 85.2 MiB/s".
func TuneNote(from, to int, prev, cur float64) string {
	verb := "rose"
	if to < from {
		verb = "fell"
	}
	return fmt.Sprintf("%d → %d session pairs: the rate %s from %s/s to %s/s", from, to, verb, plural.Bytes(int64(prev)), plural.Bytes(int64(cur)))
}
