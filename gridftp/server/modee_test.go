package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
)

// send writes MODE E pieces to a data connection.
func send(t *testing.T, c net.Conn, parts ...[]byte) {
	t.Helper()
	for _, p := range parts {
		if _, err := c.Write(p); err != nil {
			t.Fatalf("data write: %v", err)
		}
	}
}

// spread deals the blocks of data (size bs) to n streams, each stream's
// share in reverse order, so that blocks arrive out of order.
func spread(data []byte, bs, n int) [][]byte {
	out := make([][]byte, n)
	var idx [][]int
	idx = make([][]int, n)
	for i, off := 0, 0; off < len(data); i, off = i+1, off+bs {
		idx[i%n] = append(idx[i%n], off)
	}
	for s := range n {
		for j := len(idx[s]) - 1; j >= 0; j-- {
			off := idx[s][j]
			out[s] = append(out[s], block(uint64(off), data[off:min(off+bs, len(data))])...)
		}
	}
	return out
}

// finishStreams ends a transfer on every stream: EOD on all but the last,
// EOF with the count on the last.
func finishStreams(t *testing.T, conns []net.Conn) {
	t.Helper()
	for i, c := range conns {
		if i == len(conns)-1 {
			send(t, c, eof(len(conns)))
		} else {
			send(t, c, eod())
		}
	}
}

func TestModeEStoreParallel(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.MarkerInterval = 10 * time.Millisecond })
	c := env.login()
	c.expectText("MODE E", "200 Mode set to E.")
	addr := c.pasv()

	// First transfer: three streams connect after 150, blocks out of order.
	data := pattern(10*1000 + 123)
	c.send("STOR f")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("STOR: %q", r.String())
	}
	conns := []net.Conn{dialData(t, addr), dialData(t, addr), dialData(t, addr)}
	parts := spread(data, 1000, 3)
	half := len(parts[0]) / 2
	send(t, conns[0], parts[0][:half])
	time.Sleep(50 * time.Millisecond) // let periodic markers go out
	send(t, conns[0], parts[0][half:])
	send(t, conns[1], parts[1])
	send(t, conns[2], parts[2])
	finishStreams(t, conns)
	prelim, final := c.final()
	if final.String() != "226 Transfer Complete." {
		t.Fatalf("STOR: %v %q", prelim, final.String())
	}
	_, perf, ranges := markers(t, prelim)
	if len(perf) < 3 {
		t.Errorf("%d perf markers, want a start, periodic ones and an end one", len(perf))
	}
	if len(perf) > 0 && perf[len(perf)-1].Bytes != int64(len(data)) {
		t.Errorf("last perf marker counts %d bytes, want %d", perf[len(perf)-1].Bytes, len(data))
	}
	if ranges.String() != fmt.Sprintf("0-%d", len(data)) {
		t.Errorf("range markers cover %q, want 0-%d", ranges.String(), len(data))
	}
	if got := env.content("f"); !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes, want %d", len(got), len(data))
	}

	// Second transfer reuses the cached streams: 125, no new connection.
	data2 := pattern(7777)[100:]
	c.send("STOR g")
	if r := c.read(); r.String() != "125 Beginning transfer; reusing existing data connection." {
		t.Fatalf("second STOR: %q", r.String())
	}
	for i, p := range spread(data2, 500, 3) {
		send(t, conns[i], p)
	}
	finishStreams(t, conns)
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("second STOR: %q", final.String())
	}
	if got := env.content("g"); !bytes.Equal(got, data2) {
		t.Fatalf("second file: %d bytes, want %d", len(got), len(data2))
	}

	// Pipelined STORs (globus-url-copy -pp): both transfers' bytes are
	// already waiting on the streams when the first one ends.
	h1, h2 := pattern(3000), bytes.Repeat([]byte("h2"), 2000)
	for i, p := range spread(h1, 400, 3) {
		send(t, conns[i], p)
	}
	finishStreams(t, conns)
	for i, p := range spread(h2, 400, 3) {
		send(t, conns[i], p)
	}
	finishStreams(t, conns)
	c.write("STOR h1\r\nSTOR h2\r\nNOOP\r\n")
	for _, name := range []string{"h1", "h2"} {
		prelim, final := c.final()
		if begin, _, _ := markers(t, prelim); begin.Code != gridftp.CodeReusingData || final.Code != 226 {
			t.Fatalf("pipelined STOR %s: %v %q", name, prelim, final.String())
		}
	}
	if r := c.read(); r.String() != "200 NOOP command successful." {
		t.Fatalf("pipelined NOOP: %q", r.String())
	}
	if got := env.content("h1"); !bytes.Equal(got, h1) {
		t.Fatalf("h1: %d bytes", len(got))
	}
	if got := env.content("h2"); !bytes.Equal(got, h2) {
		t.Fatalf("h2: %d bytes", len(got))
	}

	// Shrinking the set: a stream sends EOD with the will-close bit and
	// closes; the EOF count still counts its EOD.
	k := pattern(2000)
	c.send("STOR k")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("STOR k: %q", r.String())
	}
	send(t, conns[2], blockHeader(gridftp.DescEOD|gridftp.DescWillClose, 0, 0))
	conns[2].Close()
	send(t, conns[0], block(0, k[:1000]), eod())
	send(t, conns[1], block(1000, k[1000:]), eof(3))
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(env.content("k"), k) {
		t.Fatalf("STOR k: %q", final.String())
	}
	// Two streams left; a new one joins during the next transfer.
	extra := dialData(t, addr)
	c.send("STOR m")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("STOR m: %q", r.String())
	}
	m := pattern(3000)
	conns = []net.Conn{conns[0], conns[1], extra}
	for i, p := range spread(m, 1000, 3) {
		send(t, conns[i], p)
	}
	finishStreams(t, conns)
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(env.content("m"), m) {
		t.Fatalf("STOR m: %q", final.String())
	}
}

func TestModeEStreamsBeforeSTOR(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expect("MODE E", 200)
	addr := c.pasv()
	// Connections made and data sent before STOR wait for it.
	conns := []net.Conn{dialData(t, addr), dialData(t, addr)}
	data := pattern(4096)
	send(t, conns[0], block(2048, data[2048:]), eod())
	send(t, conns[1], block(0, data[:2048]), eof(2))
	c.send("STOR f")
	prelim, final := c.final()
	if begin, _, _ := markers(t, prelim); begin.String() != "150 Beginning transfer." || final.String() != "226 Transfer Complete." {
		t.Fatalf("STOR: %v %q", prelim, final.String())
	}
	if got := env.content("f"); !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes", len(got))
	}
	// A new PASV drops the cached streams.
	addr = c.pasv()
	for _, dc := range conns {
		dc.SetReadDeadline(time.Now().Add(replyTimeout))
		if n, err := dc.Read(make([]byte, 1)); err == nil {
			t.Fatalf("cached stream still open after PASV (read %d)", n)
		}
	}
	dc := dialData(t, addr)
	c.send("STOR g")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("STOR after PASV: %q", r.String())
	}
	send(t, dc, block(0, []byte("g")), eof(1))
	if _, final := c.final(); final.Code != 226 || string(env.content("g")) != "g" {
		t.Fatalf("STOR g: %q", final.String())
	}
}

func TestModeEESTO(t *testing.T) {
	env := startServer(t)
	env.file("base", bytes.Repeat([]byte("a"), 100))
	c := env.login()
	c.expect("MODE E", 200)
	c.expectText("ESTO A x base", "501 ESTO: bad offset.")
	c.expectText("ESTO A -1 base", "501 ESTO: bad offset.")
	c.expectText("ESTO X 0 base", "501 ESTO: expected A OFFSET PATH.")
	c.expectText("ESTO A 5", "501 ESTO: expected A OFFSET PATH.")
	dc := dialData(t, c.pasv())
	c.send("ESTO A 50 base")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("ESTO: %q", r.String())
	}
	send(t, dc, block(10, []byte("abcde")), block(0, []byte("0123456789")), eof(1))
	prelim, final := c.final()
	if final.String() != "226 Transfer Complete." {
		t.Fatalf("ESTO: %q", final.String())
	}
	want := strings.Repeat("a", 50) + "0123456789abcde" + strings.Repeat("a", 35)
	if got := string(env.content("base")); got != want {
		t.Fatalf("after ESTO: %q", got)
	}
	// The range markers report where the bytes landed in the file.
	if _, _, ranges := markers(t, prelim); ranges.String() != "50-65" {
		t.Errorf("ESTO range markers %q, want 50-65", ranges.String())
	}
	// ESTO to a new file and past its end.
	c.send("ESTO A 5 new")
	c.read()
	send(t, dc, block(0, []byte("x")), eof(1))
	if _, final := c.final(); final.Code != 226 || string(env.content("new")) != "\x00\x00\x00\x00\x00x" {
		t.Fatalf("ESTO new: %q %q", final.String(), env.content("new"))
	}
}

// retrModeE reads one MODE E transfer that the server sends on conns.
func retrModeE(t *testing.T, conns []net.Conn) []received {
	t.Helper()
	recs := make([]received, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, dc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dc.SetReadDeadline(time.Now().Add(replyTimeout))
			recs[i], errs[i] = readModeE(dc)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	return recs
}

// eofTotal checks that exactly one stream carried EOF and returns its count.
func eofTotal(t *testing.T, recs []received) int {
	t.Helper()
	n, count := 0, 0
	for _, r := range recs {
		if r.eofCount > 0 {
			n++
			count = r.eofCount
		}
	}
	if n != 1 {
		t.Fatalf("%d streams carried EOF, want 1", n)
	}
	return count
}

func TestModeEERET(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(5000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)
	c.expectText("OPTS RETR Parallelism=2,2,2;", "200 OPTS Command Successful.")
	a := c.port()
	c.send("ERET P 1000 2500 f")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("ERET: %q", r.String())
	}
	conns := []net.Conn{a.accept(), a.accept()}
	recs := retrModeE(t, conns)
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("ERET: %q", final.String())
	}
	if n := eofTotal(t, recs); n != 2 {
		t.Fatalf("EOF count %d, want 2", n)
	}
	// Offsets are relative to the section.
	if got := assemble(t, 2500, recs...); !bytes.Equal(got, data[1000:3500]) {
		t.Fatalf("ERET section differs")
	}

	tests := []struct {
		line string
		want []byte
	}{
		{"ERET P 4000 5000 f", data[4000:]},
		{"ERET P 0 5000 f", data},
		{"ERET P 4999 1 f", data[4999:]},
		{"ERET P 5000 10 f", nil},
		{"ERET P 6000 10 f", nil},
		{"ERET P 10 0 f", nil},
	}
	for _, tt := range tests {
		c.send(tt.line)
		if r := c.read(); r.String() != "125 Beginning transfer; reusing existing data connection." {
			t.Fatalf("%s: %q", tt.line, r.String())
		}
		recs := retrModeE(t, conns)
		if _, final := c.final(); final.Code != 226 {
			t.Fatalf("%s: %q", tt.line, final.String())
		}
		eofTotal(t, recs)
		if got := assemble(t, len(tt.want), recs...); !bytes.Equal(got, tt.want) {
			t.Fatalf("%s: got %d bytes", tt.line, len(got))
		}
	}
	for _, line := range []string{"ERET P -1 10 f", "ERET P 0 -1 f", "ERET P x 1 f", "ERET Q 0 1 f", "ERET P 0 1"} {
		c.expect(line, gridftp.CodeBadArguments)
	}
}

// TestModeEERETToEnd: a length that reaches past the end of the file (a
// client asking for "the rest" with the largest length) sends the rest.
// retrieve computes off+n, which overflows int64.
func TestModeEERETToEnd(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(5000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)
	a := c.port()
	c.send("ERET P 3 9223372036854775807 f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("ERET: %q", r.String())
	}
	dc := a.accept()
	dc.SetReadDeadline(time.Now().Add(replyTimeout))
	rec, err := readModeE(dc)
	if _, final := c.final(); final.Code != 226 || err != nil {
		t.Fatalf("ERET: %q; data: %v", final.String(), err)
	}
	recs := []received{rec}
	var n int
	for _, r := range recs {
		for _, p := range r.data {
			n += len(p)
		}
	}
	if n != len(data)-3 {
		t.Fatalf("ERET P 3 <max int64> sent %d bytes, want %d", n, len(data)-3)
	}
}

func TestModeERetrRestRanges(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(5000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)
	a := c.port()
	c.expectText("REST 0-1000,2000-3000", "350 Restart Marker OK. Send STORE or RETR to initiate transfer.")
	c.send("RETR f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("RETR: %q", r.String())
	}
	dc := a.accept()
	recs := retrModeE(t, []net.Conn{dc})
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("RETR: %q", final.String())
	}
	var got gridftp.Ranges
	for _, b := range recs[0].blocks {
		got.Add(int64(b.Offset), int64(b.Offset+b.Count))
		if !bytes.Equal(recs[0].data[b.Offset], data[b.Offset:b.Offset+b.Count]) {
			t.Fatalf("block at %d differs", b.Offset)
		}
	}
	if got.String() != "1000-2000,3000-5000" {
		t.Fatalf("sent %q, want only the missing 1000-2000,3000-5000", got.String())
	}
	if recs[0].eofCount != 1 {
		t.Fatalf("EOF count %d", recs[0].eofCount)
	}
	// Everything already there: nothing but EOD/EOF.
	c.expect("REST 0-5000", 350)
	c.send("RETR f")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("RETR: %q", r.String())
	}
	recs = retrModeE(t, []net.Conn{dc})
	if _, final := c.final(); final.Code != 226 || len(recs[0].blocks) != 0 || recs[0].eofCount != 1 {
		t.Fatalf("RETR of nothing: %q, %d blocks", final.String(), len(recs[0].blocks))
	}
	// The REST applied to one transfer: the next sends the whole file.
	c.send("RETR f")
	c.read()
	recs = retrModeE(t, []net.Conn{dc})
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(assemble(t, len(data), recs...), data) {
		t.Fatalf("RETR after REST: %q", final.String())
	}
}

func TestModeEParallelism(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(10000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)
	c.expectText("OPTS RETR Parallelism=3;", "200 OPTS Command Successful.")
	a := c.port()
	c.send("RETR f")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("RETR: %q", r.String())
	}
	conns := []net.Conn{a.accept(), a.accept(), a.accept()}
	recs := retrModeE(t, conns)
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("RETR: %q", final.String())
	}
	if n := eofTotal(t, recs); n != 3 {
		t.Fatalf("EOF count %d, want 3", n)
	}
	if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
		t.Fatalf("RETR over 3 streams differs")
	}

	// Second RETR: the same three streams, no new connection.
	c.send("RETR f")
	if r := c.read(); r.String() != "125 Beginning transfer; reusing existing data connection." {
		t.Fatalf("second RETR: %q", r.String())
	}
	recs = retrModeE(t, conns)
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("second RETR: %q", final.String())
	}
	if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
		t.Fatalf("second RETR differs")
	}
	a.ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if extra, err := a.ln.Accept(); err == nil {
		extra.Close()
		t.Fatalf("the server opened a fourth stream")
	}

	// Fewer streams: the extra ones get the will-close bit and close.
	c.expect("OPTS RETR Parallelism=1;", 200)
	c.send("RETR f")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("third RETR: %q", r.String())
	}
	recs = retrModeE(t, conns)
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("third RETR: %q", final.String())
	}
	var closing, carrying []received
	for _, r := range recs {
		if r.closing {
			closing = append(closing, r)
		} else {
			carrying = append(carrying, r)
		}
	}
	if len(closing) != 2 || len(carrying) != 1 || carrying[0].eofCount != 1 {
		t.Fatalf("%d closing streams, %d carrying; EOF count %d", len(closing), len(carrying), eofTotal(t, recs))
	}
	if got := assemble(t, len(data), carrying...); !bytes.Equal(got, data) {
		t.Fatalf("third RETR differs")
	}

	// More streams: the cached one plus new connections.
	c.expect("OPTS RETR Parallelism=2;", 200)
	var keep net.Conn
	for i, r := range recs {
		if !r.closing {
			keep = conns[i]
		}
	}
	c.send("RETR f")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("fourth RETR: %q", r.String())
	}
	recs = retrModeE(t, []net.Conn{keep, a.accept()})
	if _, final := c.final(); final.Code != 226 || eofTotal(t, recs) != 2 {
		t.Fatalf("fourth RETR: %q", final.String())
	}
	if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
		t.Fatalf("fourth RETR differs")
	}
}

func TestModeEListing(t *testing.T) {
	env := startServer(t)
	env.file("a", []byte("12345"))
	env.file("d/x", nil)
	c := env.login()
	c.expect("MODE E", 200)
	a := c.port()
	c.send("MLSD /")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("MLSD: %q", r.String())
	}
	recs := retrModeE(t, []net.Conn{a.accept()})
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("MLSD: %q", final.String())
	}
	var n int
	for _, p := range recs[0].data {
		n += len(p)
	}
	listing := string(assemble(t, n, recs...))
	entries := map[string]gridftp.Entry{}
	for _, line := range strings.Split(strings.TrimSuffix(listing, "\r\n"), "\r\n") {
		e, err := gridftp.ParseEntry(line)
		if err != nil {
			t.Fatalf("MLSD line %q: %v", line, err)
		}
		entries[e.Name] = e
	}
	if e := entries["a"]; e.Type != "file" || e.Size != 5 {
		t.Errorf("a: %+v", e)
	}
	if e := entries["d"]; e.Type != "dir" {
		t.Errorf("d: %+v", e)
	}
	if e := entries["."]; e.Type != "cdir" {
		t.Errorf(".: %+v", e)
	}
	if len(entries) != 4 {
		t.Errorf("MLSD entries %v", entries)
	}
}

// TestModeERetrOverPASV: after PASV (FEAT PASVSEND) a MODE E sender takes
// the streams the receiver connects, as many as its parallelism; other
// servers (GCT) refuse, since in MODE E the sender normally connects.
func TestModeERetrOverPASV(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(10000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)
	c.expect("OPTS RETR Parallelism=3;", 200)
	addr := c.pasv()
	conns := []net.Conn{dialData(t, addr), dialData(t, addr), dialData(t, addr)}
	for range 2 { // the second time over the cached streams
		c.send("RETR f")
		if r := c.read(); r.Code != gridftp.CodeOpeningData && r.Code != gridftp.CodeReusingData {
			t.Fatalf("RETR: %q", r.String())
		}
		recs := retrModeE(t, conns)
		if _, final := c.final(); final.Code != gridftp.CodeTransferComplete {
			t.Fatalf("RETR: %q", final.String())
		}
		if n := eofTotal(t, recs); n != 3 {
			t.Fatalf("EOF count %d, want 3", n)
		}
		if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
			t.Fatal("RETR over 3 passive streams differs")
		}
	}
	c.expectText("NOOP", "200 NOOP command successful.")
}

// TestModeEStorOverPORT: an active MODE E receiver connects as many streams
// as its parallelism, which the sender uses too.
func TestModeEStorOverPORT(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expect("MODE E", 200)
	c.expect("OPTS RETR Parallelism=2;", 200)
	a := c.port()
	c.send("STOR f")
	conns := []net.Conn{a.accept(), a.accept()}
	if r := c.read(); r.Code != gridftp.CodeOpeningData {
		t.Fatalf("STOR: %q", r.String())
	}
	send(t, conns[0], block(0, []byte("hello ")), eod())
	send(t, conns[1], block(6, []byte("world")), eof(2))
	if _, final := c.final(); final.Code != gridftp.CodeTransferComplete {
		t.Fatalf("STOR: %q", final.String())
	}
	if got := env.content("f"); string(got) != "hello world" {
		t.Fatalf("stored %q", got)
	}
}

func TestModeEBrokenStreams(t *testing.T) {
	tests := []struct {
		name  string
		parts [][]byte
		class string
	}{
		{"cut inside a block", [][]byte{blockHeader(0, 1000, 0), []byte("0123456789")}, "DATA_CHANNEL"},
		{"cut inside a header", [][]byte{block(0, []byte("ab")), blockHeader(0, 5, 2)[:9]}, "DATA_CHANNEL"},
		{"closed before EOD", [][]byte{block(0, []byte("ab"))}, "DATA_CHANNEL"},
		{"closed at once", nil, "DATA_CHANNEL"},
		{"EOF with EOD count 0", [][]byte{block(0, []byte("ab")), blockHeader(gridftp.DescEOF|gridftp.DescEOD, 0, 0)}, "PROTOCOL"},
		{"EOF with payload", [][]byte{blockHeader(gridftp.DescEOF|gridftp.DescEOD, 3, 1), []byte("abc")}, "PROTOCOL"},
		{"count overflows", [][]byte{blockHeader(0, 1<<63, 1<<62)}, "PROTOCOL"},
	}
	env := startServer(t, func(s *server.Server) { s.DataTimeout = 300 * time.Millisecond })
	c := env.login()
	c.expect("MODE E", 200)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := dialData(t, c.pasv())
			c.send("STOR f")
			if r := c.read(); r.Code != 150 {
				t.Fatalf("STOR: %q", r.String())
			}
			// The server may reset the stream as soon as it reads a bad
			// header, before the rest is written: only the reply says
			// what it made of the stream.
			for _, p := range tt.parts {
				if _, err := dc.Write(p); err != nil {
					break
				}
			}
			dc.Close()
			_, final := c.final()
			if final.Code != gridftp.CodeTransferAborted || final.Lines[0] != "GlobusError: v=1 c="+tt.class {
				t.Fatalf("got %q, want 426 %s", final.String(), tt.class)
			}
			c.expectText("NOOP", "200 NOOP command successful.")
		})
	}
	t.Run("too few streams for the EOF count", func(t *testing.T) {
		dc := dialData(t, c.pasv())
		c.send("STOR f")
		c.read()
		send(t, dc, block(0, []byte("ab")), eof(2))
		// Only the data timeout ends the wait for the second stream
		// before the read's (replyTimeout).
		_, final := c.final()
		if final.Code != gridftp.CodeTransferAborted {
			t.Fatalf("got %q, want 426", final.String())
		}
		c.expectText("NOOP", "200 NOOP command successful.")
	})
	t.Run("stream stays silent", func(t *testing.T) {
		dialData(t, c.pasv())
		c.send("STOR f")
		c.read()
		if _, final := c.final(); final.Code != gridftp.CodeTransferAborted {
			t.Fatalf("got %q, want 426", final.String())
		}
	})
	t.Run("nobody connects", func(t *testing.T) {
		c.pasv()
		c.send("STOR f")
		c.read()
		if _, final := c.final(); final.Code != gridftp.CodeTransferAborted {
			t.Fatalf("got %q, want 426", final.String())
		}
	})
	// The session still transfers.
	dc := dialData(t, c.pasv())
	c.send("STOR f")
	c.read()
	send(t, dc, block(0, []byte("fine")), eof(1))
	if _, final := c.final(); final.Code != 226 || string(env.content("f")) != "fine" {
		t.Fatalf("STOR after failures: %q", final.String())
	}
}

// TestRetrPeerVanishes: the receiving side of a RETR goes away.
func TestRetrPeerVanishes(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 64 << 10 })
	env.file("big", nil)
	if err := truncate(env, "big", 64<<20); err != nil {
		t.Fatal(err)
	}
	c := env.login()
	for _, mode := range []string{"S", "E"} {
		t.Run("MODE "+mode, func(t *testing.T) {
			c.expect("MODE "+mode, 200)
			var dc net.Conn
			if mode == "S" {
				dc = dialData(t, c.pasv())
				c.send("RETR big")
			} else {
				a := c.port()
				c.send("RETR big")
				dc = a.accept()
			}
			if r := c.read(); r.Code != 150 {
				t.Fatalf("RETR: %q", r.String())
			}
			io.ReadFull(dc, make([]byte, 1000))
			dc.(*net.TCPConn).SetLinger(0) // reset, not a polite close
			dc.Close()
			_, final := c.final()
			if final.Code/100 != 4 {
				t.Fatalf("RETR to a vanished peer: %q", final.String())
			}
			c.expectText("NOOP", "200 NOOP command successful.")
		})
	}
}

func TestStriped(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 1000 })
	data := pattern(6000)
	env.file("f", data)
	c := env.login()
	c.expect("MODE E", 200)

	// SPAS: one stripe, RFC 2389-style address line.
	r := c.expect("SPAS", gridftp.CodeExtPassive)
	if len(r.Lines) != 3 || r.Lines[0] != "Entering Striped Passive Mode." || r.Lines[2] != "End" {
		t.Fatalf("SPAS: %q", r.String())
	}
	aps, err := gridftp.ParseHostPorts(r.Lines[1])
	if err != nil || len(aps) != 1 {
		t.Fatalf("SPAS address %q: %v", r.Lines[1], err)
	}
	dc := dialData(t, aps[0].String())
	c.send("STOR g")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	send(t, dc, block(0, data), eof(1))
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(env.content("g"), data) {
		t.Fatalf("STOR over SPAS: %q", final.String())
	}

	// SPOR: each address is a receiving stripe, as with GCT: it gets the
	// parallelism's streams and an EOF of its own.
	var lns [2]*activeListener
	var addrs []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i] = &activeListener{t: t, ln: ln}
		addrs = append(addrs, gridftp.FormatHostPort(ln.Addr().(*net.TCPAddr).AddrPort()))
	}
	c.expectText("SPOR "+strings.Join(addrs, " "), "200 SPOR Command successful.")
	c.expect("OPTS RETR Parallelism=2;", 200)
	c.send("RETR f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("RETR: %q", r.String())
	}
	recs := retrModeE(t, []net.Conn{lns[0].accept(), lns[0].accept(), lns[1].accept(), lns[1].accept()})
	if _, final := c.final(); final.Code != 226 || eofTotal(t, recs[:2]) != 2 || eofTotal(t, recs[2:]) != 2 {
		t.Fatalf("RETR over SPOR: %q", final.String())
	}
	if got := assemble(t, len(data), recs...); !bytes.Equal(got, data) {
		t.Fatalf("RETR over SPOR differs")
	}
}

// TestModeEStaleAfterRefusedStore: a sender that streams before the
// STOR (a third-party transfer's) leaves this file's blocks on the data
// channel; when the STOR is refused before it reads them (the file cannot
// be made), they must not become the next file's content: the next STOR
// gets no data from that connection (the listener it came to is closed:
// the next transfer needs a new PASV), never the refused file's.
func TestModeEStaleAfterRefusedStore(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expect("MODE E", 200)
	addr := c.pasv()
	staleData := []byte("blocks of the refused file")
	stale := dialData(t, addr)
	send(t, stale, block(0, staleData), eof(1))
	c.send("STOR /no/such/dir/x")
	if _, final := c.final(); final.Code < 400 {
		t.Fatalf("STOR into a missing directory: %q", final.String())
	}
	c.send("STOR /y")
	_, final := c.final()
	got, _ := os.ReadFile(filepath.Join(env.root, "y")) // none is fine
	if final.Code == 226 || bytes.Contains(got, staleData) {
		t.Fatalf("the next STOR took the refused file's data: %q, file %q", final.String(), got)
	}
}
