package main

import (
	"ferry/internal/plural"
	"fmt"
	"io"
	"sync"
	"time"
)

// bar is a one-line progress display for a terminal, redrawn four times a
// second from what read returns: ferry copy's engine counters or the task
// ferry wait polls. When not live it draws nothing, and line just prints.
type bar struct {
	out  io.Writer
	live bool
	read func() barState
	mu   sync.Mutex
	quit chan struct{}
	wg   sync.WaitGroup
}

// barState is what the bar shows.
type barState struct {
	Done, Files  int64         // files finished, of those known so far
	Moved, Bytes int64         // bytes moved, of those known (0: not known)
	Rate         float64       // bytes per second
	Elapsed      time.Duration // since the work began
}

func startBar(out io.Writer, live bool, read func() barState) *bar {
	b := &bar{out: out, live: live, read: read, quit: make(chan struct{})}
	if live {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					b.draw()
				case <-b.quit:
					return
				}
			}
		}()
	}
	return b
}

// line prints s on a line of its own, above the bar.
func (b *bar) line(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live {
		fmt.Fprint(b.out, "\r\033[K")
	}
	fmt.Fprintln(b.out, s)
}

func (b *bar) draw() {
	s := b.read().String()
	b.mu.Lock()
	fmt.Fprint(b.out, "\r\033[K"+s)
	b.mu.Unlock()
}

// stop ends the display and clears the bar's line.
func (b *bar) stop() {
	if b.live {
		close(b.quit)
		b.wg.Wait()
		fmt.Fprint(b.out, "\r\033[K")
	}
}

// String is the bar's line: files, bytes, rate and the time left, from the
// bytes left when their total is known, else from the files left.
func (s barState) String() string {
	eta := "--"
	switch {
	case s.Bytes > s.Moved && s.Rate > 0:
		eta = time.Duration(float64(s.Bytes-s.Moved) / s.Rate * float64(time.Second)).Round(time.Second).String()
	case s.Bytes == 0 && s.Done > 0 && s.Files > s.Done:
		eta = (s.Elapsed * time.Duration(s.Files-s.Done) / time.Duration(s.Done)).Round(time.Second).String()
	}
	bytes := plural.Bytes(s.Moved)
	if s.Bytes > 0 {
		bytes += "/" + plural.Bytes(s.Bytes)
	}
	return fmt.Sprintf("files %d/%d  %s  %s/s  ETA %s", s.Done, s.Files, bytes, plural.Bytes(int64(s.Rate)), eta)
}

// rateMeter is the rate of a counter seen now and then, such as a task's
// bytes_transferred, which the worker persists in batches and ferry wait
// polls: each change counts over the time since the change before it (not
// since the last look, which may have seen no change yet), smoothed with
// the rate before. Between changes the rate holds for twice the time the
// last two changes came apart (at least holdMin), then falls as the
// silence goes on, so a stalled task shows it. The first look takes the
// rate given (the task's average since it started).
type rateMeter struct {
	seen bool
	n    int64         // the counter at its last change
	at   time.Time     // when the change was seen
	gap  time.Duration // between the last two changes
	r    float64       // bytes per second as of the last change
}

// holdMin is the least time a rate holds after a change.
const holdMin = 2 * time.Second

// observe records the counter n, seen at now; first is the rate to start
// from on the first look, or when the counter went back (a task that
// started again).
func (m *rateMeter) observe(n int64, now time.Time, first float64) {
	switch {
	case !m.seen || n < m.n:
		*m = rateMeter{seen: true, n: n, at: now, r: first}
	case n > m.n:
		gap := now.Sub(m.at)
		if gap <= 0 {
			return // seen in the same instant: wait for time to pass
		}
		inst := float64(n-m.n) / gap.Seconds()
		if m.r > 0 {
			inst = (m.r + inst) / 2
		}
		*m = rateMeter{seen: true, n: n, at: now, gap: gap, r: inst}
	}
}

// rate is the rate to show at now.
func (m *rateMeter) rate(now time.Time) float64 {
	hold := max(2*m.gap, holdMin)
	if quiet := now.Sub(m.at); quiet > hold {
		return m.r * hold.Seconds() / quiet.Seconds()
	}
	return m.r
}
