package gridftp

import (
	"context"
	"net"
	"strings"
	"time"
)

// Stream growth: a MODE E sender may add streams while a transfer runs.
// The receiver learns how many streams carried the transfer only from the
// EOF at the end (GFD.20), so streams may join at any time before it;
// OPTS RETR Parallelism=start,min,max names how many at most. Over a
// path with random loss a loss-based congestion control (cubic) caps
// each stream's window far below the link (Mathis), and the rate grows
// with the number of streams (150 ms, 0.1 %: globus-url-copy with 4, 8
// and 16 streams 270, 128 and 60 s for 512 MiB; bench/LOG.md, issue
// 17); where the streams already fill the link, more add nothing. So the
// sender probes: it adds half as many streams again and keeps growing
// while the rate rises with them, and stops at the first probe that does
// not pay.

// Growth lets a send add streams, up to Max in all, while they add
// throughput.
type Growth struct {
	Max int
	// Dial opens n more streams to the receiver, as the first were.
	Dial func(ctx context.Context, n int) ([]*Stream, error)
	// Period is how long each step of the probe lasts; 0: from the first
	// stream's round trip (growPeriod).
	Period time.Duration
	// AnyControl grows whatever the streams' congestion control; else
	// not under one whose rate loss does not bound (bbr: lossBound).
	AnyControl bool
	// Clock, when set, is when the send had moved the given bytes over
	// the given number of streams; nil: now. Tests set it to a simulated
	// path's time, which passes with the bytes it carries, so that a busy
	// machine, which runs the streams late, changes how much a period
	// carries but not the rates a probe compares.
	Clock func(streams int, moved int64) time.Time
}

// when is the time of a reading of the bytes moved over streams.
func (g *Growth) when(streams int, moved int64) time.Time {
	if g.Clock != nil {
		return g.Clock(streams, moved)
	}
	return time.Now()
}

// GrowthResult is what a send that could grow did: the streams it ended
// with that paid (Kept; the others joined for a probe that did not), and
// whether the probing is over (Done) rather than cut short by the end of
// the data. Added are the streams that joined, all of them.
type GrowthResult struct {
	Added []*Stream
	Kept  int
	Done  bool
}

// Probe steps, each one period long.
const (
	growSettle = iota // the first streams ramp up, until the rate stops falling
	growBase          // the rate of the streams there are
	growRamp          // streams just added ramp up
	growJudge         // did the rate rise with them?
)

// growSteady is the rate ratio of two periods from which the first
// streams count as settled: cubic leaves slow start far above where loss
// then holds it, and the rate falls for several periods (150 ms, 0.1 %,
// 16 streams, 2.4 s periods: 300, 223, 114, 90, 81, 79 Mb/s), which a
// probe would take for streams that do not pay.
const growSteady = 0.9

// growShare is the share of the rate rise in proportion to the streams
// added that keeps them: half as many again must bring at least a fifth
// more. Where streams are loss-bound the rise is about proportional;
// where they fill the link, about none; single periods vary by a tenth.
const growShare = 0.4

// prober is a probe's state between periods.
type prober struct {
	max   int
	phase int
	n     int     // streams now
	added int     // streams the last step added
	base  float64 // rate before the last step, bytes/s
	prev  float64 // rate of the period before, while settling
	done  bool
}

// step takes the rate of the period just ended and returns how many
// streams to add now (0: none).
func (p *prober) step(rate float64) int {
	if p.done {
		return 0
	}
	switch p.phase {
	case growSettle:
		if p.prev == 0 || rate < growSteady*p.prev {
			p.prev = rate
			return 0
		}
	case growRamp:
		p.phase = growJudge
		return 0
	case growJudge:
		before := p.n - p.added
		if rate < p.base*(1+growShare*float64(p.added)/float64(before)) {
			p.n, p.done = before, true // the last ones did not pay
			return 0
		}
	}
	p.base = rate
	p.added = min((p.n+1)/2, p.max-p.n)
	if p.added <= 0 {
		p.done = true
		return 0
	}
	p.n += p.added
	p.phase = growRamp
	return p.added
}

// lossBound reports whether a stream's rate is bounded by loss, so that
// more streams may raise it: not under bbr, which paces at the rate it
// measures whatever the random loss (20 ms, 0.1 %, bbr, shallow queue:
// 512 MiB in 4.99 s probing against 4.86 s without, median of 4;
// bench/LOG.md, issue 17).
func lossBound(c net.Conn) bool {
	return !strings.HasPrefix(congestionControl(c), "bbr")
}

// growPeriod is a probe step over a path of round trip rtt: long enough
// for new streams to leave slow start, at least a second, at most eight.
func growPeriod(rtt time.Duration) time.Duration {
	if rtt <= 0 {
		return 2 * time.Second
	}
	return min(max(16*rtt, time.Second), 8*time.Second)
}

// grower runs a probe for a send: every period it reads the bytes moved
// so far (moved) and, when the probe says so, adds streams (add, which
// reports how many joined). It ends with ctx.
func (g *Growth) run(ctx context.Context, first net.Conn, n int, moved func() int64, add func(int) int) (kept int, done bool) {
	p := &prober{max: g.Max, n: n}
	period := g.Period
	if period <= 0 {
		period = growPeriod(streamRTT(first))
	}
	t := time.NewTicker(period)
	defer t.Stop()
	last := moved()
	at := g.when(p.n, last)
	for {
		select {
		case <-ctx.Done():
			if p.phase == growJudge || p.phase == growRamp {
				return p.n - p.added, false // cut short: what was proven
			}
			return p.n, p.done
		case <-t.C:
			// The rate between the readings, not the ticks: a tick taken
			// late would count what moved since against its period.
			b := moved()
			now := g.when(p.n, b)
			rate := float64(b-last) / now.Sub(at).Seconds()
			last, at = b, now
			if k := p.step(rate); k > 0 {
				if got := add(k); got < k {
					p.n -= k - got
					p.added = got
					if got == 0 {
						p.done = true
					}
				}
			}
			if p.done {
				return p.n, true
			}
		}
	}
}
