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
// polls: a moving average, the bytes of the changes within rateWindow of
// the last one over the time they took (from the change before the
// window's first, so a batch counts over the time it gathered), not the
// last change alone, which may be one small batch. Between changes the
// rate holds for twice the time the last two changes came apart (at least
// holdMin), then falls as the silence goes on, so a stalled task shows it.
// The first look takes the rate given (the task's average since it
// started).
type rateMeter struct {
	first   float64    // the rate given at the first look
	changes []rateMark // the first look, then the changes, within rateWindow and the one before
}

// rateMark is the counter n as seen at a time.
type rateMark struct {
	n  int64
	at time.Time
}

const (
	holdMin    = 2 * time.Second  // the least time a rate holds after a change
	rateWindow = 10 * time.Second // the changes the rate averages
)

// observe records the counter n, seen at now; first is the rate to start
// from on the first look, or when the counter went back (a task that
// started again).
func (m *rateMeter) observe(n int64, now time.Time, first float64) {
	last := len(m.changes) - 1
	switch {
	case last < 0 || n < m.changes[last].n:
		*m = rateMeter{first: first, changes: []rateMark{{n, now}}}
	case n > m.changes[last].n && now.After(m.changes[last].at):
		m.changes = append(m.changes, rateMark{n, now})
		for len(m.changes) > 2 && now.Sub(m.changes[1].at) > rateWindow {
			m.changes = m.changes[1:]
		}
	}
}

// rate is the rate to show at now.
func (m *rateMeter) rate(now time.Time) float64 {
	k := len(m.changes)
	if k < 2 {
		return m.first
	}
	base, last, prev := m.changes[0], m.changes[k-1], m.changes[k-2]
	r := float64(last.n-base.n) / last.at.Sub(base.at).Seconds()
	hold := max(2*last.at.Sub(prev.at), holdMin)
	if quiet := now.Sub(last.at); quiet > hold {
		return r * hold.Seconds() / quiet.Seconds()
	}
	return r
}
