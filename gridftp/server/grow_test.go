package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/storage"
)

// slowReads is a tree whose every read takes a while, so that a send
// lasts the periods of its probe.
type slowReads struct {
	storage.Driver
	delay time.Duration
}

func (s slowReads) Open(ctx context.Context, name string) (storage.File, error) {
	f, err := s.Driver.Open(ctx, name)
	return slowFile{f, s}, err
}

type slowFile struct {
	storage.File
	s slowReads
}

func (f slowFile) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(f.s.delay)
	return f.File.ReadAt(p, off)
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSendGrows: a ferry source given OPTS RETR Parallelism's maximum
// adds streams to a ferry destination while they add throughput, which
// takes them in mid-transfer and stores every byte; the next file starts
// with the streams that paid (closing those of a probe that did not).
// Without a maximum nothing is added.
func TestSendGrows(t *testing.T) {
	for _, tc := range []struct {
		name       string
		max        int
		linkBound  bool
		mib        int // the file's size
		kept, grew int // streams kept after the first file, and the most it had
	}{
		// At most 3.2 MB/s a stream (the reads' sleeps), a file lasts
		// the periods its probe takes however fast the machine: 8 for
		// maximum 8 (at most 23 MB), 5 for the link-bound (8 MB).
		{"maximum 8", 8, false, 32, 8, 8},
		{"link-bound: one probe", 8, true, 16, 2, 3},
		{"no maximum", 0, false, 4, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logBuffer{}
			src := startServer(t, func(s *server.Server) {
				// Reads slow enough that the send lasts the periods of
				// its probe (8 streams: ~26 MB/s).
				s.FS = slowReads{Driver: s.FS, delay: 20 * time.Millisecond}
				s.GrowPeriod = 200 * time.Millisecond
				s.GrowAnyControl = true // loopback may run bbr
				s.BlockSize = 64 << 10
				s.Logger = slog.New(slog.NewTextHandler(logs, nil))
				// The rates are measured in the path's time, which passes
				// with the bytes it carries (and a nanosecond at each
				// reading, so that no two are the same): over a full link
				// at its rate whatever the number of streams, over a lossy
				// path at a stream's rate times the streams. A busy
				// machine that runs the streams late makes a period carry
				// less, not its rate differ (on a wall clock one core
				// shared with a busy loop failed most runs of both cases).
				const rate = 4 << 20 // bytes a second: the link's, or a stream's
				clock, last := time.Now(), int64(0)
				server.SetGrowClock(s, func(streams int, moved int64) time.Time {
					r := int64(rate)
					if !tc.linkBound {
						r *= int64(streams)
					}
					clock = clock.Add(time.Duration((moved-last)*int64(time.Second)/r) + 1)
					last = moved
					return clock
				})
			})
			dst := startServer(t)
			data := pattern(tc.mib << 20)
			src.file("f", data)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var conns []*client.Conn
			for _, addr := range []string{src.addr, dst.addr} {
				c, err := client.Dial(ctx, addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
					t.Fatal(err)
				}
				if _, ok := c.Feature("STREAMGROW"); !ok {
					t.Fatal("FEAT names no STREAMGROW")
				}
				conns = append(conns, c)
			}
			p := &client.Pair{Src: conns[0], Dst: conns[1], MaxParallel: tc.max}
			if err := p.Setup(ctx, 2); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"g1", "g2"} {
				part := client.Part{SrcPath: "/f", DstPath: "/" + name, Length: -1}
				if err := p.Start(part); err != nil {
					t.Fatal(err)
				}
				if err := p.Finish(ctx, part, client.Markers{}); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(dst.content(name), data) {
					t.Fatalf("%s differs", name)
				}
			}
			grown := regexp.MustCompile(`msg="streams grown" .*from=(\d+) to=(\d+) kept=(\d+)`).FindAllStringSubmatch(logs.String(), -1)
			if tc.max == 0 {
				if len(grown) > 0 {
					t.Fatalf("streams grown without a maximum: %q", grown)
				}
				return
			}
			if len(grown) < 1 {
				t.Fatalf("no streams grown:\n%s", logs)
			}
			num := func(s string) int { n, _ := strconv.Atoi(s); return n }
			if from, to, kept := num(grown[0][1]), num(grown[0][2]), num(grown[0][3]); from != 2 || to != tc.grew || kept != tc.kept {
				t.Fatalf("first file: %s; want from 2 to %d, %d kept", grown[0][0], tc.grew, tc.kept)
			}
			if len(grown) > 1 {
				t.Fatalf("the second file grew again: %s", grown[1][0])
			}
		})
	}
}
