// Command idle measures what idle control sessions cost a GridFTP server.
//
// It opens -n control connections to -addr, logs each one in (USER/PASS),
// then holds them all open and idle. With -pid it measures the server's
// memory before the first connection and after the last login (once the
// server has settled), and prints the difference per session:
//
//	idle -addr 127.0.0.1:2811 -n 2000 -pid 1234            # one process (ferry)
//	idle -addr 127.0.0.1:2812 -n 100 -pid 5678 -children   # forks per session (GCT)
//
// For a single-process server the figures are the growth of VmRSS (from
// /proc/PID/status) and of Pss and USS (Private_Clean + Private_Dirty, from
// /proc/PID/smaps_rollup). For a server that forks one process per session
// (-children) they are the sums of Rss, Pss and USS over the descendants of
// PID. Rss counts the pages the forked children share once per child; Pss
// divides them among the sharers, so it is the fairer total, and USS is
// what each further session adds for certain.
//
// With -inproc DIR it instead runs ferry's GridFTP server inside this process,
// serving DIR on 127.0.0.1:0, and also reports the Go heap and goroutine
// stacks per session (runtime.MemStats after a GC). The client side of each
// connection lives in the same process then, so those figures are an upper
// bound (the client keeps only its net.Conn per session).
//
// The last line of output is machine-readable: "RESULT key=value ...".
// Connections are only ever made to the given address; use 127.0.0.1.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/textproto"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ferry/gridftp/server"
	"ferry/storage/posix"
)

func main() {
	var (
		addr     = flag.String("addr", "", "server control address HOST:PORT")
		n        = flag.Int("n", 2000, "sessions to open")
		user     = flag.String("user", "anonymous", "USER")
		pass     = flag.String("pass", "x", "PASS")
		pid      = flag.Int("pid", 0, "server process to measure (0: do not measure)")
		children = flag.Bool("children", false, "measure the descendants of -pid (a server that forks per session)")
		inproc   = flag.String("inproc", "", "run ferry's server in this process over `DIR` and measure it")
		conc     = flag.Int("concurrency", 16, "logins in flight at once")
		settle   = flag.Duration("settle", 2*time.Second, "wait after the last login before measuring")
		hold     = flag.Duration("hold", 0, "keep the sessions this long after measuring (0: exit; <0: until SIGINT/SIGTERM)")
		timeout  = flag.Duration("timeout", 30*time.Second, "limit for one connection and login")
	)
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("idle: ")
	if (*addr == "") == (*inproc == "") {
		log.Fatal("give exactly one of -addr or -inproc")
	}
	if *n < 1 {
		log.Fatal("-n must be at least 1")
	}
	raiseNoFile()

	var srv *server.Server
	goroutines := 0
	if *inproc != "" {
		var err error
		srv, *addr, err = startInProc(*inproc)
		goroutines = runtime.NumGoroutine()
		if err != nil {
			log.Fatal(err)
		}
		*pid = os.Getpid()
		defer srv.Close()
	}

	var before, after mem
	var heapBefore, heapAfter runtime.MemStats
	measure := func(m *mem, ms *runtime.MemStats) {
		if *pid == 0 {
			return
		}
		var err error
		if *children {
			*m, err = descendantsMem(*pid)
		} else {
			*m, err = processMem(*pid)
		}
		if err != nil {
			log.Fatal(err)
		}
		if srv != nil {
			runtime.GC()
			debug.FreeOSMemory()
			runtime.ReadMemStats(ms)
		}
	}
	measure(&before, &heapBefore)

	start := time.Now()
	conns, err := openSessions(*addr, *n, *conc, *timeout, *user, *pass)
	if err != nil {
		closeAll(conns)
		log.Fatal(err)
	}
	fmt.Printf("ready: %d sessions logged in to %s in %.2fs\n", len(conns), *addr, time.Since(start).Seconds())

	if *pid != 0 {
		time.Sleep(*settle)
		if srv != nil && srv.Sessions() != *n {
			log.Fatalf("server holds %d sessions, want %d", srv.Sessions(), *n)
		}
		measure(&after, &heapAfter)
		report(*n, *children, before, after, srv != nil, goroutines, &heapBefore, &heapAfter)
	}

	switch {
	case *hold < 0:
		fmt.Println("holding: send SIGINT or SIGTERM to end")
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		<-ctx.Done()
		stop()
	case *hold > 0:
		time.Sleep(*hold)
	}
	closeAll(conns)
}

// openSessions dials n control connections, conc at a time, and logs each in.
func openSessions(addr string, n, conc int, timeout time.Duration, user, pass string) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, max(conc, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := login(addr, timeout, user, pass)
			if err != nil {
				errs <- fmt.Errorf("session %d: %w", i+1, err)
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
		if len(all) == 5 {
			all = append(all, fmt.Errorf("(%d failures in all)", len(errs)+5))
			break
		}
	}
	kept := conns[:0]
	for _, c := range conns {
		if c != nil {
			kept = append(kept, c)
		}
	}
	return kept, errors.Join(all...)
}

// login opens one session and logs it in; only the connection is kept
// afterwards, so the client holds as little as possible per session.
func login(addr string, timeout time.Duration, user, pass string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	tp := textproto.NewReader(bufio.NewReaderSize(c, 512))
	step := func(cmd string, want int) error {
		what := "banner"
		if cmd != "" {
			what, _, _ = strings.Cut(cmd, " ")
			if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
				return err
			}
		}
		code, msg, err := tp.ReadResponse(0)
		if err != nil {
			return fmt.Errorf("after %s: %w", what, err)
		}
		if code/100 != want/100 {
			return fmt.Errorf("after %s: %d %s", what, code, msg)
		}
		return nil
	}
	for _, s := range []struct {
		cmd  string
		want int
	}{{"", 220}, {"USER " + user, 331}, {"PASS " + pass, 230}} {
		if err := step(s.cmd, s.want); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// mem is a memory reading in KiB; uss counts the pages private to the
// process (Private_Clean + Private_Dirty).
type mem struct {
	rss, pss, uss int64
	procs         int
}

// processMem reads one process: VmRSS from status, Pss from smaps_rollup.
func processMem(pid int) (mem, error) {
	rss, err := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	if err != nil {
		return mem{}, err
	}
	r, err := rollup(pid)
	if err != nil {
		return mem{}, err
	}
	r.rss = rss
	return r, nil
}

// descendantsMem sums Rss and Pss (smaps_rollup) over every descendant of
// pid, not pid itself.
func descendantsMem(pid int) (mem, error) {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		id, _ := strconv.Atoi(strings.Fields(s)[0])
		if len(f) > 1 {
			parent[id], _ = strconv.Atoi(f[1])
		}
	}
	var m mem
	for id := range parent {
		if !descends(id, pid, parent) {
			continue
		}
		r, err := rollup(id)
		if err != nil {
			continue // exited meanwhile
		}
		m.rss += r.rss
		m.pss += r.pss
		m.uss += r.uss
		m.procs++
	}
	return m, nil
}

func descends(id, ancestor int, parent map[int]int) bool {
	for range 64 {
		p, ok := parent[id]
		if !ok || p == 0 {
			return false
		}
		if p == ancestor {
			return true
		}
		id = p
	}
	return false
}

// rollup reads Rss, Pss and Private_* from /proc/PID/smaps_rollup.
func rollup(pid int) (mem, error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	var m mem
	var err error
	var clean, dirty int64
	for _, f := range []struct {
		key string
		v   *int64
	}{{"Rss:", &m.rss}, {"Pss:", &m.pss}, {"Private_Clean:", &clean}, {"Private_Dirty:", &dirty}} {
		if *f.v, err = procField(path, f.key); err != nil {
			return mem{}, err
		}
	}
	m.uss, m.procs = clean+dirty, 1
	return m, nil
}

// procField returns the kB value of the first line starting with key.
func procField(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s line", path, key)
}

func report(n int, children bool, before, after mem, inproc bool, goroutines int, hb, ha *runtime.MemStats) {
	per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	what := "process"
	if children {
		what = fmt.Sprintf("%d forked processes", after.procs)
	}
	fmt.Printf("memory (%s): RSS %d -> %d KiB, PSS %d -> %d KiB, USS %d -> %d KiB\n",
		what, before.rss, after.rss, before.pss, after.pss, before.uss, after.uss)
	fmt.Printf("per session: RSS %.1f KiB, PSS %.1f KiB, USS %.1f KiB\n",
		per(before.rss, after.rss), per(before.pss, after.pss), per(before.uss, after.uss))
	result := fmt.Sprintf("RESULT sessions=%d procs=%d rss_kib_per_session=%.1f pss_kib_per_session=%.1f uss_kib_per_session=%.1f",
		n, after.procs, per(before.rss, after.rss), per(before.pss, after.pss), per(before.uss, after.uss))
	if inproc {
		heap := per(int64(hb.HeapAlloc), int64(ha.HeapAlloc)) / 1024
		stack := per(int64(hb.StackInuse), int64(ha.StackInuse)) / 1024
		fmt.Printf("per session (Go runtime, server and client in one process): heap %.1f KiB, goroutine stacks %.1f KiB, goroutines %d -> %d\n",
			heap, stack, goroutines, runtime.NumGoroutine())
		result += fmt.Sprintf(" heap_kib_per_session=%.1f stack_kib_per_session=%.1f", heap, stack)
	}
	fmt.Println(result)
}

// startInProc serves dir with ferry's GridFTP server on 127.0.0.1:0.
func startInProc(dir string) (*server.Server, string, error) {
	fs, err := posix.New(dir)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &server.Server{FS: fs, Anonymous: true, MaxSessionsPerAddress: -1} // every session is from loopback
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// raiseNoFile lifts the soft open-files limit to the hard one (Go does this
// at start-up too; this makes it explicit and reports the result).
func raiseNoFile() {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
