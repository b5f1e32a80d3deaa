package client_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
)

// startServer runs a ferry endpoint server on a temp root.
func startServer(t *testing.T) (addr, root string) {
	t.Helper()
	root, fs := servertest.Root(t)
	return servertest.Serve(t, &server.Server{FS: fs, Anonymous: true, BlockSize: 64 << 10, DataTimeout: 10 * time.Second}), root
}

func dial(t *testing.T, addr string, parallel int) *client.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
		t.Fatal(err)
	}
	c.SetOptions(client.Options{Parallel: parallel, BlockSize: 100 << 10})
	return c
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// buffer is an io.WriterAt over a byte slice of known size.
type buffer struct{ b []byte }

func (w *buffer) WriteAt(p []byte, off int64) (int, error) { return copy(w.b[off:], p), nil }

func TestLoginAndFeatures(t *testing.T) {
	addr, _ := startServer(t)
	c := dial(t, addr, 1)
	if _, ok := c.Feature("PARALLEL"); !ok {
		t.Error("FEAT lacks PARALLEL")
	}
	algs := c.Checksums()
	if len(algs) < 7 || algs[0] != "MD5" {
		t.Errorf("checksums from FEAT = %v", algs)
	}
}

func TestWrongPassword(t *testing.T) {
	addr, _ := startServer(t)
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Login(context.Background(), "alice", "nope")
	var ge *gridftp.Error
	if !errors.As(err, &ge) || ge.Reply.Code != gridftp.CodeNotLoggedIn {
		t.Fatalf("login error = %v, want 530", err)
	}
	if want := "login: 530 Login incorrect."; err.Error() != want {
		t.Errorf("login error %q, want %q", err, want)
	}
	if err := c.Login(context.Background(), "alice", "pw\r\nDELE /x"); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("a password with a line break: error %v; want one that does not show it", err)
	}
}

// step is one exchange of a scripted server: it reads the commands, then
// sends the replies.
type step struct {
	commands []string
	replies  string
}

// scripted serves one connection that runs steps after its banner. It
// reads a step's commands before it answers any of them, so a client that
// waits for a reply within a step hangs (until its Timeout) and fails.
func scripted(t *testing.T, steps ...step) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("220 scripted\r\n"))
		r := bufio.NewReader(c)
		for _, s := range steps {
			for _, want := range s.commands {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if got := strings.TrimRight(line, "\r\n"); got != want {
					t.Errorf("server got %q, want %q", got, want)
					return
				}
			}
			c.Write([]byte(s.replies))
		}
		io.Copy(io.Discard, r)
	}()
	return ln.Addr().String()
}

// loginStep is a pipelined anonymous login to a scripted server.
var loginStep = step{
	[]string{"USER anonymous", "PASS ferry@", "TYPE I", "FEAT"},
	"331 Password please.\r\n230 In.\r\n200 Type set to I.\r\n211-Features:\r\n PARALLEL\r\n211 End.\r\n",
}

func dialScripted(t *testing.T, addr string) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Timeout = 5 * time.Second
	return c
}

func TestLoginPipelined(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     step
		bad   string
		stage string // of the HandshakeError; "": the error is not one
	}{
		{"password asked", loginStep, "", ""},
		{"no password asked: PASS ignored", step{loginStep.commands,
			"230 In.\r\n503 Already logged in.\r\n200 Type set to I.\r\n211-Features:\r\n PARALLEL\r\n211 End.\r\n"}, "", ""},
		{"FEAT refused", step{loginStep.commands,
			"331 Password please.\r\n230 In.\r\n200 Type set to I.\r\n500 Unknown command.\r\n"}, "", ""},
		{"user refused", step{loginStep.commands,
			"530 Not you.\r\n503 Login with USER first.\r\n530 Log in first.\r\n211 End.\r\n"}, "login: 530 Not you.", client.StageLogin},
		{"password refused", step{loginStep.commands,
			"331 Password please.\r\n530 Not you.\r\n530 Log in first.\r\n211 End.\r\n"}, "login: 530 Not you.", client.StageLogin},
		{"not FTP", step{loginStep.commands, "+OK POP3 ready\r\n"}, `login: gridftp: malformed reply: "+OK POP3 ready"`, client.StageLogin},
		{"TYPE refused", step{loginStep.commands,
			"331 Password please.\r\n230 In.\r\n504 No.\r\n211 End.\r\n"}, "TYPE I: 504 No.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialScripted(t, scripted(t, tc.s))
			err := c.Login(context.Background(), "anonymous", "ferry@")
			if tc.bad != "" {
				if err == nil || err.Error() != tc.bad {
					t.Fatalf("login error %v, want %q", err, tc.bad)
				}
				stage := ""
				if he, ok := errors.AsType[*client.HandshakeError](err); ok {
					stage = he.Stage
				}
				if stage != tc.stage {
					t.Fatalf("login error %v: handshake stage %q, want %q", err, stage, tc.stage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Feature("PARALLEL"); !ok && tc.name != "FEAT refused" {
				t.Error("features not read")
			}
			if c.RTT() <= 0 {
				t.Error("no round trip measured")
			}
		})
	}
}

// TestPairSetupPipelined: setting up a pair takes one round trip to each
// side; the source's PORT waits only for the destination's PASV.
func TestPairSetupPipelined(t *testing.T) {
	src := dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "OPTS RETR Parallelism=3,3,3;Markers=5;", "OPTS CKSM Live=MD5;", "PORT 127,0,0,1,4,1"},
		"200 MODE E ok.\r\n200 OPTS ok.\r\n200 Live.\r\n200 PORT ok.\r\n",
	}))
	dst := dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "OPTS CKSM Live=MD5;", "PASV"},
		"200 MODE E ok.\r\n200 Live.\r\n227 Entering Passive Mode (127,0,0,1,4,1)\r\n",
	}))
	ctx := context.Background()
	for _, c := range []*client.Conn{src, dst} {
		if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
			t.Fatal(err)
		}
	}
	p := &client.Pair{Src: src, Dst: dst, Live: "MD5"}
	if err := p.Setup(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(ctx, 3); err != nil { // set up already: nothing is sent
		t.Fatal(err)
	}

	// Reversed: the source listens, the destination connects as many streams.
	src = dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "OPTS RETR Parallelism=2,2,2;Markers=5;", "PASV"},
		"200 MODE E ok.\r\n200 OPTS ok.\r\n227 Entering Passive Mode (127,0,0,1,4,2)\r\n",
	}))
	dst = dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "OPTS RETR Parallelism=2,2,2;", "PORT 127,0,0,1,4,2"},
		"200 MODE E ok.\r\n200 OPTS ok.\r\n200 PORT ok.\r\n",
	}))
	for _, c := range []*client.Conn{src, dst} {
		if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
			t.Fatal(err)
		}
	}
	p = &client.Pair{Src: src, Dst: dst, Reverse: true}
	if err := p.Setup(ctx, 2); err != nil {
		t.Fatal(err)
	}
}

// TestPairParallelismAhead: a pair set up but not yet used that is set up
// again for another parallelism costs no round trip when its source takes
// a parallelism after PORT (FEAT STREAMGROW, a ferry server): the source
// gets the new OPTS RETR ahead of the first transfer, and neither side a
// new PASV or PORT; a refusal fails that transfer. A source that does not
// (GCT fixes it at PORT) gets a new PASV and PORT: its first transfer ran
// on the old parallelism.
func TestPairParallelismAhead(t *testing.T) {
	growLogin := step{loginStep.commands, strings.Replace(loginStep.replies, " PARALLEL\r\n", " PARALLEL\r\n STREAMGROW 64\r\n", 1)}
	for _, tc := range []struct {
		name, bad string
		srcLogin  step
		src, dst  []step // after the first setup
	}{
		{"accepted", "", growLogin,
			[]step{{[]string{"OPTS RETR Parallelism=4,4,4;Markers=5;", "RETR /f"}, "200 OPTS ok.\r\n226 Sent.\r\n"}},
			[]step{{[]string{"STOR /g"}, "226 Stored.\r\n"}}},
		{"refused", "501 Too many.", growLogin,
			[]step{{[]string{"OPTS RETR Parallelism=4,4,4;Markers=5;", "RETR /f"}, "501 Too many.\r\n226 Sent.\r\n"}},
			[]step{{[]string{"STOR /g"}, "226 Stored.\r\n"}}},
		{"fixed at PORT", "", loginStep,
			[]step{
				{[]string{"OPTS RETR Parallelism=4,4,4;Markers=5;", "PORT 127,0,0,1,4,2"}, "200 OPTS ok.\r\n200 PORT ok.\r\n"},
				{[]string{"RETR /f"}, "226 Sent.\r\n"},
			},
			[]step{
				{[]string{"PASV"}, "227 Entering Passive Mode (127,0,0,1,4,2)\r\n"},
				{[]string{"STOR /g"}, "226 Stored.\r\n"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := dialScripted(t, scripted(t, append([]step{tc.srcLogin, {
				[]string{"MODE E", "OPTS RETR Parallelism=1,1,1;Markers=5;", "PORT 127,0,0,1,4,1"},
				"200 MODE E ok.\r\n200 OPTS ok.\r\n200 PORT ok.\r\n",
			}}, tc.src...)...))
			dst := dialScripted(t, scripted(t, append([]step{loginStep, {
				[]string{"MODE E", "PASV"},
				"200 MODE E ok.\r\n227 Entering Passive Mode (127,0,0,1,4,1)\r\n",
			}}, tc.dst...)...))
			ctx := context.Background()
			for _, c := range []*client.Conn{src, dst} {
				if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
					t.Fatal(err)
				}
			}
			p := &client.Pair{Src: src, Dst: dst}
			for _, n := range []int{1, 4} {
				if err := p.Setup(ctx, n); err != nil {
					t.Fatalf("Setup(%d): %v", n, err)
				}
			}
			part := client.Part{SrcPath: "/f", DstPath: "/g", Length: -1}
			if err := p.Start(part); err != nil {
				t.Fatal(err)
			}
			err := p.Finish(ctx, part, client.Markers{})
			if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("Finish = %v, want error %q", err, tc.bad)
			}
		})
	}
}

// TestPairReverse: a reversed pair puts the source in passive mode and has
// the destination connect its streams, between two ferry servers, over
// cached streams for a second file and for pipelined chunks.
func TestPairReverse(t *testing.T) {
	ctx := context.Background()
	srcAddr, srcRoot := startServer(t)
	dstAddr, dstRoot := startServer(t)
	src, dst := dial(t, srcAddr, 1), dial(t, dstAddr, 1)
	if _, ok := src.Feature("PASVSEND"); !ok {
		t.Fatal("ferry's server does not offer PASVSEND")
	}
	data := randomBytes(t, 5<<20+3)
	os.WriteFile(filepath.Join(srcRoot, "f"), data, 0o644)
	p := &client.Pair{Src: src, Dst: dst, Reverse: true}
	if err := p.Setup(ctx, 4); err != nil {
		t.Fatal(err)
	}
	parts := []client.Part{
		{SrcPath: "/f", DstPath: "/whole", Length: -1},
		{SrcPath: "/f", DstPath: "/chunks", Offset: 0, Length: 1 << 20},
		{SrcPath: "/f", DstPath: "/chunks", Offset: 1 << 20, Length: int64(len(data)) - 1<<20},
	}
	for _, part := range parts {
		if err := p.Start(part); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range parts {
		if err := p.Finish(ctx, part, client.Markers{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"whole", "chunks"} {
		if got, err := os.ReadFile(filepath.Join(dstRoot, name)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s differs (%v)", name, err)
		}
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		size     int
	}{
		{"empty", 1, 0},
		{"one stream", 1, 1 << 20},
		{"four streams", 4, 3<<20 + 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			addr, root := startServer(t)
			c := dial(t, addr, tc.parallel)
			data := randomBytes(t, tc.size)
			for i := range 2 { // the second round reuses the cached streams
				n, err := c.Put(ctx, "/f.bin", bytes.NewReader(data), 0, int64(len(data)))
				if err != nil || n != int64(len(data)) {
					t.Fatalf("round %d: Put = %d, %v", i, n, err)
				}
				got, err := os.ReadFile(filepath.Join(root, "f.bin"))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("round %d: stored file differs (%v)", i, err)
				}
				back := &buffer{b: make([]byte, len(data))}
				if n, err := c.Get(ctx, "/f.bin", back, 0, -1); err != nil || n != int64(len(data)) {
					t.Fatalf("round %d: Get = %d, %v", i, n, err)
				}
				if !bytes.Equal(back.b, data) {
					t.Fatalf("round %d: retrieved bytes differ", i)
				}
			}
		})
	}
}

func TestPartialTransfers(t *testing.T) {
	ctx := context.Background()
	addr, root := startServer(t)
	c := dial(t, addr, 2)
	data := randomBytes(t, 1<<20)
	os.WriteFile(filepath.Join(root, "f"), data, 0o644)
	out := &buffer{b: make([]byte, len(data))}
	if _, err := c.Get(ctx, "/f", out, 1000, 300000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.b[1000:301000], data[1000:301000]) || out.b[999] != 0 || out.b[301000] != 0 {
		t.Error("ERET section landed wrong")
	}
	// STOR the first half, then ESTO A the second half at its offset.
	half := int64(len(data) / 2)
	if _, err := c.Put(ctx, "/g", bytes.NewReader(data[:half]), 0, half); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/g", bytes.NewReader(data[half:]), half, half); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "g")); !bytes.Equal(got, data) {
		t.Error("STOR + ESTO A did not rebuild the file")
	}
}

func TestListStatChecksum(t *testing.T) {
	ctx := context.Background()
	addr, root := startServer(t)
	c := dial(t, addr, 1)
	data := randomBytes(t, 12345)
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "a b"), data, 0o644)
	os.WriteFile(filepath.Join(root, "d", "empty"), nil, 0o644)
	entries, err := c.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Name != "a b" || entries[0].Size != 12345 || entries[1].Name != "empty" {
		t.Fatalf("List = %+v", entries)
	}
	e, err := c.Stat(ctx, "/d")
	if err != nil || !e.IsDir() {
		t.Fatalf("Stat = %+v, %v", e, err)
	}
	sum := md5.Sum(data)
	got, err := c.Checksum(ctx, "MD5", "/d/a b", 0, -1)
	if err != nil || got != hex.EncodeToString(sum[:]) {
		t.Fatalf("Checksum = %q, %v", got, err)
	}
	if n, err := c.Size(ctx, "/d/a b"); err != nil || n != 12345 {
		t.Fatalf("Size = %d, %v", n, err)
	}
	_, err = c.Stat(ctx, "/missing")
	var ge *gridftp.Error
	if !errors.As(err, &ge) || ge.Reply.Code != gridftp.CodeFileUnavailable {
		t.Fatalf("Stat of a missing path: %v", err)
	}
}

func TestPipelining(t *testing.T) {
	ctx := context.Background()
	addr, root := startServer(t)
	c := dial(t, addr, 1)
	for i := range 20 {
		os.WriteFile(filepath.Join(root, string(rune('a'+i))), make([]byte, i), 0o644)
	}
	for i := range 20 {
		if err := c.Send("SIZE /%c", rune('a'+i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		rep, err := c.Final(ctx, nil)
		if err != nil || rep.String() != "213 "+strconv.Itoa(i) {
			t.Fatalf("reply %d = %q, %v; want 213 %d", i, rep.String(), err, i)
		}
	}
}

// TestSendRename: a rename sent (SendRename) goes out ahead of the next
// command, or before the next reply is read when no command follows, and
// RenameReply reads its outcome in its turn: done, or refused as a
// *gridftp.Error whether RNFR or RNTO refused it.
func TestSendRename(t *testing.T) {
	c := dialScripted(t, scripted(t, loginStep, step{
		[]string{"RNFR /a.part", "RNTO /a", "STOR /b.part"},
		"350 Go on.\r\n250 Renamed.\r\n553 No room.\r\n",
	}, step{
		[]string{"RNFR /b.part", "RNTO /b"},
		"550 No such file.\r\n503 RNFR first.\r\n",
	}, step{
		[]string{"RNFR /c.part", "RNTO /c"},
		"350 Go on.\r\n553 Not there.\r\n",
	}))
	ctx := context.Background()
	if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendRename("/a.part", "/a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send("STOR /b.part"); err != nil {
		t.Fatal(err)
	}
	if err := c.RenameReply(ctx); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := c.Final(ctx, nil); err == nil || !strings.Contains(err.Error(), "553 No room.") {
		t.Fatalf("STOR: %v", err)
	}
	for _, tc := range []struct{ name, want string }{{"b", "550 No such file."}, {"c", "553 Not there."}} {
		if err := c.SendRename("/"+tc.name+".part", "/"+tc.name); err != nil {
			t.Fatal(err)
		}
		err := c.RenameReply(ctx) // no command follows: sent before the read
		var refused *gridftp.Error
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("rename of %s: %v, want a refusal %q", tc.name, err, tc.want)
		}
	}
}

// wrapped is a connection that a DialFunc made of another: a tunnel's, to
// the client.
type wrapped struct{ net.Conn }

// TestRoundTrips: a session measures the banner's and the login's round
// trips, and one more with each Ping; RTT is the least. PeerIP names the
// server over a TCP connection straight to it, and nothing over a
// connection a dial wrapped.
func TestRoundTrips(t *testing.T) {
	addr, _ := startServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		dial   client.DialFunc
		direct bool
	}{
		{"TCP", nil, true},
		{"wrapped", func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			return wrapped{c}, err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.DialWith(ctx, tc.dial, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if n := c.RTTSamples(); n != 1 || c.RTT() <= 0 {
				t.Errorf("after the banner: %d samples, round trip %v; want 1, above 0", n, c.RTT())
			}
			if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
				t.Fatal(err)
			}
			least := c.RTT()
			for want := 2; want <= 4; want++ {
				if n := c.RTTSamples(); n != want || c.RTT() > least {
					t.Errorf("%d samples, round trip %v; want %d, at most %v", n, c.RTT(), want, least)
				}
				least = c.RTT()
				if err := c.Ping(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ip, ok := c.PeerIP()
			if want := netip.MustParseAddr("127.0.0.1"); ok != tc.direct || tc.direct && ip != want {
				t.Errorf("PeerIP %v, %v; want %v: %v", ip, ok, want, tc.direct)
			}
		})
	}
}

// TestPingRefused: a server that refuses NOOP answers in a round trip all
// the same: Ping counts it, and the session goes on.
func TestPingRefused(t *testing.T) {
	c := dialScripted(t, scripted(t, loginStep, step{[]string{"NOOP"}, "500 Unknown command.\r\n"}, step{[]string{"PWD"}, "257 \"/\"\r\n"}))
	if err := c.Login(context.Background(), "anonymous", "ferry@"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil || c.RTTSamples() != 3 {
		t.Fatalf("Ping: %v, %d samples; want no error, 3 samples", err, c.RTTSamples())
	}
	if _, err := c.Do(context.Background(), "PWD"); err != nil {
		t.Fatal(err)
	}
}
