package server_test

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/stack"
	"ferry/stack/tarstream"
)

func withTarLayers(s *server.Server) {
	s.Layers = stack.Kinds()
	maps.Copy(s.Layers, tarstream.Kinds())
}

// untilBegin reads replies up to 150 or 125 and returns the 113 replies
// that came first.
func untilBegin(t *testing.T, c *ctl) []gridftp.Reply {
	t.Helper()
	var early []gridftp.Reply
	for {
		r := c.read()
		switch r.Code {
		case gridftp.CodeOpeningData, gridftp.CodeReusingData:
			return early
		case gridftp.CodeMembers:
			early = append(early, r)
		default:
			t.Fatalf("before the transfer: %q", r.String())
		}
	}
}

// memberReports reads the 113 replies among prelim as "name size sum" or
// "name fail code".
func memberReports(t *testing.T, prelim []gridftp.Reply) []string {
	t.Helper()
	var out []string
	for _, r := range prelim {
		if r.Code != gridftp.CodeMembers {
			continue
		}
		ms, err := gridftp.ParseMembers(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Fault != nil {
				out = append(out, fmt.Sprintf("%s fail %d", m.Name, m.Fault.Code))
				continue
			}
			out = append(out, fmt.Sprintf("%s %d %s", m.Name, m.Size, m.Sum))
		}
	}
	return out
}

// TestTarLayerRoundTrip: members of a tree leave one server as a tar
// stream over four MODE E streams, with a 113 report each, and are
// unpacked by another, which reports them too; cksum lists the tree.
func TestTarLayerRoundTrip(t *testing.T) {
	src := startServer(t, withTarLayers, func(s *server.Server) { s.BlockSize = 32 << 10 })
	dst := startServer(t, withTarLayers)
	files := map[string][]byte{
		"a":        pattern(300<<10 + 11),
		"sub/b c":  []byte("bee"),
		"ü 100%":   []byte("unicode and percent"),
		"empty":    {},
		"sub/deep": pattern(5000),
	}
	for name, data := range files {
		src.file("tree/"+name, data)
	}
	names := []string{"sub/deep", "a", "missing", "ü 100%", "empty", "sub/b c"}
	sum := func(b []byte) string { h := md5.Sum(b); return hex.EncodeToString(h[:]) }
	var want []string
	for _, n := range names {
		if n == "missing" {
			want = append(want, "missing fail 550")
			continue
		}
		want = append(want, fmt.Sprintf("%s %d %s", n, len(files[n]), sum(files[n])))
	}

	c := src.login()
	c.expect("SITE SETDISKSTACK tar:cksm=md5", 250)
	c.expect("MODE E", 200)
	c.expect("OPTS RETR Parallelism=4;", 200)
	a := c.port()
	for _, cmd := range gridftp.MembersCommands(names, 100) {
		c.expect(cmd, 200)
	}
	c.send("RETR /tree")
	early := untilBegin(t, c)
	conns := []net.Conn{a.accept(), a.accept(), a.accept(), a.accept()}
	recs := retrModeE(t, conns)
	prelim, final := c.final()
	if final.Code != 226 {
		t.Fatalf("RETR: %q", final.String())
	}
	if got := memberReports(t, append(early, prelim...)); !slices.Equal(got, want) {
		t.Fatalf("RETR reported\n%q\nwant\n%q", got, want)
	}
	n := 0
	for _, r := range recs {
		for off, p := range r.data {
			n = max(n, int(off)+len(p))
		}
	}
	stream := assemble(t, n, recs...)
	if eofTotal(t, recs) != 4 {
		t.Fatal("EOF count")
	}

	d := dst.login()
	d.expect("SITE SETDISKSTACK tar:cksm=md5", 250)
	d.expect("MODE E", 200)
	addr := d.pasv()
	d.send("STOR /copy/here")
	early = untilBegin(t, d)
	dconns := []net.Conn{dialData(t, addr), dialData(t, addr), dialData(t, addr), dialData(t, addr)}
	for i, part := range spread(stream, 16<<10, 4) {
		send(t, dconns[i], part)
	}
	finishStreams(t, dconns)
	prelim, final = d.final()
	if final.Code != 226 {
		t.Fatalf("STOR: %q", final.String())
	}
	want = slices.DeleteFunc(want, func(s string) bool { return strings.HasPrefix(s, "missing") })
	if got := memberReports(t, append(early, prelim...)); !slices.Equal(got, want) {
		t.Fatalf("STOR reported\n%q\nwant\n%q", got, want)
	}
	for name, data := range files {
		if got := dst.content("copy/here/" + name); string(got) != string(data) {
			t.Errorf("%s: %d bytes, want %d", name, len(got), len(data))
		}
	}
	dst.checkOutside()

	// A corrupt stream fails the STOR, with the reason.
	d.send("STOR /copy/bad")
	untilBegin(t, d)
	send(t, dconns[0], block(0, []byte(strings.Repeat("not a tar stream", 100))))
	send(t, dconns[0], eof(1))
	if _, final := d.final(); final.Code/100 != 4 || !strings.Contains(final.Text(), "not a tar stream") {
		t.Fatalf("a corrupt stream: %q", final.String())
	}

	// cksum lists the tree, and refuses to store.
	c.expect("SITE SETDISKSTACK cksum", 250)
	c.expect("MODE S", 200)
	dc := dialData(t, c.pasv())
	got := readAllAsync(dc)
	c.send("RETR /tree")
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("RETR cksum: %q", final.String())
	}
	var lines string
	for _, n := range []string{"a", "empty", "sub/b c", "sub/deep", "ü 100%"} {
		lines += sum(files[n]) + "  " + n + "\n"
	}
	if b := <-got; string(b) != lines {
		t.Fatalf("cksum:\n%s\nwant\n%s", b, lines)
	}
	c.pasv()
	c.send("STOR /tree/x")
	if _, final := c.final(); final.Code != 550 || !strings.Contains(final.Text(), "cannot store") {
		t.Fatalf("STOR through cksum: %q", final.String())
	}
}
