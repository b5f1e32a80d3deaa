package main

import (
	"fmt"
	"io"
	"strconv"
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
	bytes := humanBytes(s.Moved)
	if s.Bytes > 0 {
		bytes += "/" + humanBytes(s.Bytes)
	}
	return fmt.Sprintf("files %d/%d  %s  %s/s  ETA %s", s.Done, s.Files, bytes, humanBytes(int64(s.Rate)), eta)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
