package server_test

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// stripedEnv is a front end (the testEnv clients talk to) and its data
// movers, all over one tree.
type stripedEnv struct {
	*testEnv
	key    []byte
	movers []*server.Server
	addrs  []string
}

// startStriped starts n data movers over a fresh tree and a front end
// driving them.
func startStriped(t *testing.T, n int) *stripedEnv {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	se := &stripedEnv{key: key}
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		se.addrs = append(se.addrs, ln.Addr().String())
	}
	se.testEnv = startServer(t, func(s *server.Server) { s.Movers, s.MoverKey = se.addrs, key })
	for _, ln := range lns {
		fsys, err := posix.New(se.root)
		if err != nil {
			t.Fatal(err)
		}
		m := &server.Server{FS: fsys, Mover: true, MoverKey: key, DataTimeout: 3 * time.Second,
			MarkerInterval: 50 * time.Millisecond, BlockSize: 64 << 10}
		se.movers = append(se.movers, m)
		served := make(chan error, 1)
		go func() { served <- m.Serve(ln) }()
		t.Cleanup(func() {
			m.Close()
			if err := <-served; !errors.Is(err, server.ErrServerClosed) {
				t.Errorf("mover: Serve returned %v", err)
			}
			fsys.Close()
		})
	}
	return se
}

// spas asks for the striped passive ports.
func (c *ctl) spas() []string {
	c.t.Helper()
	r := c.expect("SPAS", gridftp.CodeExtPassive)
	if len(r.Lines) < 3 || r.Lines[0] != "Entering Striped Passive Mode." || r.Lines[len(r.Lines)-1] != "End" {
		c.t.Fatalf("SPAS: %q", r.String())
	}
	var addrs []string
	for _, l := range r.Lines[1 : len(r.Lines)-1] {
		aps, err := gridftp.ParseHostPorts(l)
		if err != nil || len(aps) != 1 {
			c.t.Fatalf("SPAS line %q: %v", l, err)
		}
		addrs = append(addrs, aps[0].String())
	}
	return addrs
}

// begin sends a transfer command and expects its 150.
func (c *ctl) begin(line string) {
	c.t.Helper()
	c.send(line)
	if r := c.read(); r.Code != gridftp.CodeOpeningData {
		c.t.Fatalf("%s: %q", line, r.String())
	}
}

// storeStriped sends the blocks of data (size bs) that l gives each
// stripe to that stripe's port, one stream each, each stripe with its
// own EOF, as globus-url-copy -stripe does.
func storeStriped(t *testing.T, addrs []string, data []byte, l gridftp.Layout, bs int) {
	t.Helper()
	all := []gridftp.Range{{Start: 0, End: int64(len(data))}}
	for j, addr := range addrs {
		dc := dialData(t, addr)
		for _, r := range l.Split(all, 0, int64(len(data)), j, len(addrs)) {
			for off := r.Start; off < r.End; off += int64(bs) {
				send(t, dc, block(uint64(off), data[off:min(off+int64(bs), r.End)]))
			}
		}
		send(t, dc, eof(1))
	}
}

// stripeReceiver takes the connections of one receiving stripe until as
// many EODs as its EOF announced have come.
func stripeReceiver(t *testing.T, ln net.Listener) <-chan []received {
	ch := make(chan []received, 1)
	go func() {
		var recs []received
		defer func() { ch <- recs }()
		want, eods := -1, 0
		for want < 0 || eods < want {
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(replyTimeout))
			c, err := ln.Accept()
			if err != nil {
				t.Errorf("stripe %v: %v", ln.Addr(), err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(replyTimeout))
			rec, err := readModeE(c)
			if err != nil {
				t.Errorf("stripe %v: %v", ln.Addr(), err)
				return
			}
			recs = append(recs, rec)
			eods++
			if rec.eofCount > 0 {
				if want >= 0 {
					t.Errorf("stripe %v: a second EOF", ln.Addr())
				}
				want = rec.eofCount
			}
		}
	}()
	return ch
}

// TestStripedMovers moves files through 1, 2 and 4 movers both ways, in both
// layouts: each receiving stripe gets the blocks the layout gives it, and
// the markers name their stripe.
func TestStripedMovers(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for _, l := range []gridftp.Layout{{BlockSize: 96 << 10}, {Partitioned: true}} {
			t.Run(fmt.Sprintf("%d movers %s", n, l), func(t *testing.T) {
				se := startStriped(t, n)
				data := pattern(1<<20 + 12345)
				c := se.login()
				c.expect("MODE E", 200)
				c.expect("OPTS RETR "+l.String(), 200)

				// Into the movers' passive ports.
				addrs := c.spas()
				if len(addrs) != n {
					t.Fatalf("SPAS gave %d addresses, want %d", len(addrs), n)
				}
				c.begin("STOR /f")
				storeStriped(t, addrs, data, l, 40000)
				prelim, final := c.final()
				if final.Code != 226 || !bytes.Equal(se.content("f"), data) {
					t.Fatalf("striped STOR: %q", final.String())
				}
				_, perf, ranges := markers(t, prelim)
				if !ranges.Contains(0, int64(len(data))) {
					t.Errorf("range markers %v do not cover the file", ranges)
				}
				stripes := map[int]bool{}
				for _, p := range perf {
					if p.StripeCount != n {
						t.Errorf("perf marker of stripe %d of %d, want of %d", p.StripeIndex, p.StripeCount, n)
					}
					stripes[p.StripeIndex] = true
				}
				if len(stripes) != n {
					t.Errorf("perf markers from stripes %v, want %d", stripes, n)
				}

				// Out to striped receivers: each mover sends its part.
				var sls []net.Listener
				var spor []string
				for range n {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { ln.Close() })
					sls = append(sls, ln)
					spor = append(spor, gridftp.FormatHostPort(ln.Addr().(*net.TCPAddr).AddrPort()))
				}
				c.expectText("SPOR "+strings.Join(spor, " "), "200 SPOR Command successful.")
				c.expect("OPTS RETR Parallelism=2;", 200)
				var chans []<-chan []received
				for _, ln := range sls {
					chans = append(chans, stripeReceiver(t, ln))
				}
				c.begin("RETR /f")
				var recs []received
				for j, ch := range chans {
					got := <-ch
					for _, rec := range got {
						for off, p := range rec.data {
							r := gridftp.Range{Start: int64(off), End: int64(off) + int64(len(p))}
							if part := l.Split([]gridftp.Range{r}, 0, int64(len(data)), j, n); len(part) != 1 || part[0] != r {
								t.Errorf("stripe %d got bytes %v, which the layout gives another", j, r)
							}
						}
					}
					recs = append(recs, got...)
				}
				if _, final := c.final(); final.Code != 226 {
					t.Fatalf("striped RETR: %q", final.String())
				}
				if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
					t.Fatal("striped RETR differs")
				}
			})
		}
	}
}

// TestMoverRefusesStrangers: a mover answers nobody without the mover
// key, not even with a banner.
func TestMoverRefusesStrangers(t *testing.T) {
	se := startStriped(t, 1)
	addr := se.addrs[0]

	plain, err := net.DialTimeout("tcp", addr, replyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Write([]byte("USER anonymous\r\n"))
	plain.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _ := plain.Read(buf)
	if bytes.Contains(buf[:n], []byte("220")) || bytes.Contains(buf[:n], []byte("331")) {
		t.Fatalf("a plain connection got %q", buf[:n])
	}

	dial := func(key []byte) (string, error) {
		conf, err := server.MoverTLS(key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: replyTimeout}, "tcp", addr, conf)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	other := bytes.Repeat([]byte("x"), 32)
	if got, err := dial(other); err == nil && strings.HasPrefix(got, "220") {
		t.Fatalf("a client with another key got %q", got)
	}
	if got, err := dial(se.key); err != nil || !strings.HasPrefix(got, "220") {
		t.Fatalf("the front end's key: %q, %v", got, err)
	}
}

// TestMoverKilled: a mover that dies mid-transfer fails it with a reply
// naming that mover; the range markers the others sent let the client
// send only what is missing, through the movers still up.
func TestMoverKilled(t *testing.T) {
	se := startStriped(t, 2)
	data := pattern(3 << 20)
	l := gridftp.Layout{BlockSize: 256 << 10}
	c := se.login()
	c.expect("MODE E", 200)
	addrs := c.spas()
	c.begin("STOR /f")
	// Stripe 0 gets all of its part; stripe 1 a block, then its mover dies.
	all := []gridftp.Range{{Start: 0, End: int64(len(data))}}
	d0 := dialData(t, addrs[0])
	for _, r := range l.Split(all, 0, int64(len(data)), 0, 2) {
		send(t, d0, block(uint64(r.Start), data[r.Start:r.End]))
	}
	send(t, d0, eof(1))
	d1 := dialData(t, addrs[1])
	send(t, d1, block(256<<10, data[256<<10:512<<10]))
	time.Sleep(300 * time.Millisecond) // markers of what mover 1 wrote
	se.movers[1].Close()
	prelim, final := c.final()
	if final.Code != gridftp.CodeLocalError || !strings.Contains(final.Text(), "data mover 1 ("+se.addrs[1]+")") {
		t.Fatalf("reply after mover 1 died: %q", final.String())
	}
	_, _, ranges := markers(t, prelim)
	for _, r := range l.Split(all, 0, int64(len(data)), 0, 2) {
		if !ranges.Contains(r.Start, r.End) {
			t.Fatalf("range markers %v miss stripe 0's %v", ranges, r)
		}
	}

	// The client restarts with what the markers said arrived; the front
	// end has one mover left.
	c.expect("REST "+ranges.String(), gridftp.CodePending)
	addrs = c.spas()
	if len(addrs) != 1 {
		t.Fatalf("SPAS after a mover died: %v", addrs)
	}
	c.begin("STOR /f")
	dc := dialData(t, addrs[0])
	var resent int64
	for _, r := range ranges.Missing(0, int64(len(data))) {
		send(t, dc, block(uint64(r.Start), data[r.Start:r.End]))
		resent += r.Len()
	}
	send(t, dc, eof(1))
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(se.content("f"), data) {
		t.Fatalf("restarted STOR: %q", final.String())
	}
	if resent > int64(len(data))/2 {
		t.Errorf("resent %d of %d bytes: what stripe 0 completed went again", resent, len(data))
	}

	r := c.expect("SITE MOVERS", 200)
	if !strings.Contains(r.String(), " 0 "+se.addrs[0]+" up") || !strings.Contains(r.String(), " 1 "+se.addrs[1]+" down") {
		t.Fatalf("SITE MOVERS: %q", r.String())
	}
}

// TestStripedAbort: ABOR during a striped receive stops every mover, and
// the session goes on.
func TestStripedAbort(t *testing.T) {
	se := startStriped(t, 2)
	c := se.login()
	c.expect("MODE E", 200)
	addrs := c.spas()
	c.begin("STOR /f")
	for _, a := range addrs {
		send(t, dialData(t, a), block(0, pattern(1000)))
	}
	c.send("ABOR")
	_, final := c.final()
	if final.Code != gridftp.CodeTransferAborted {
		t.Fatalf("aborted STOR: %q", final.String())
	}
	if r := c.read(); r.Code != 226 {
		t.Fatalf("ABOR: %q", r.String())
	}
	data := pattern(5000)
	addrs = c.spas()
	c.begin("STOR /g")
	storeStriped(t, addrs, data, gridftp.Layout{}, 1000)
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(se.content("g"), data) {
		t.Fatalf("STOR after ABOR: %q", final.String())
	}
}

// TestStripedPipelined: a client pipelines two RETRs to a striped source
// and two STORs to a plain receiver over one MODE E data channel, as
// globus-url-copy -pp and ferry's engine do. The second file's data must
// not reach the receiver while it still takes the first: the movers keep
// their data connections across transfers, as any MODE E sender does,
// so the second file's blocks follow the first's EODs on the same
// connections instead of arriving on new ones the receiver would take
// for the first file's.
func TestStripedPipelined(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d movers", n), func(t *testing.T) {
			se := startStriped(t, n)
			big, small := pattern(6<<20+777), bytes.Repeat([]byte("small file "), 9000)
			se.file("big", big)
			se.file("small", small)
			dst := startServer(t)
			d := dst.login()
			d.expect("MODE E", 200)
			addr := d.pasv()
			s := se.login()
			s.expect("MODE E", 200)
			s.expect("OPTS RETR Parallelism=2;", 200)
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			s.expectText("PORT "+gridftp.FormatHostPort(ap), "200 PORT Command successful.")
			for range 2 { // the second round reuses the data channels
				d.send("STOR /big")
				d.send("STOR /small")
				s.send("RETR /big")
				s.send("RETR /small")
				for _, c := range []*ctl{s, s, d, d} {
					if _, final := c.final(); final.Code != 226 {
						t.Fatalf("pipelined transfer: %q", final.String())
					}
				}
				if !bytes.Equal(dst.content("big"), big) || !bytes.Equal(dst.content("small"), small) {
					t.Fatal("the pipelined files differ from their sources")
				}
			}
		})
	}
}
