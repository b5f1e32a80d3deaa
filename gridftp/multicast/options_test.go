package multicast

import (
	"slices"
	"strings"
	"testing"

	"ferry/gridftp"
	"ferry/stack"
)

// The stacks globus-url-copy -MC and GCT's driver were seen to send
// (grid-extensions.md, section b).
const (
	guc2    = "file,gridftp_multicast:%3Burls%3D%23ftp%253A//127.0.0.1%253A50213/data/mc2/big.bin?%23ftp%253A//127.0.0.1%253A50214/data/mc3/big.bin?"
	gucOpts = "file,gridftp_multicast:cc%3D1%3BP%3D2%3Burls%3D%23ftp%253A//127.0.0.1%253A50213/data/mc2/big.bin?local_write%253Dn%23ftp%253A//127.0.0.1%253A50214/data/mc3/big.bin?"
	fwdBC   = "file,gridftp_multicast:urls%3D%23ftp%253A//127.0.0.1%253A50214/data/mc3/big.bin?%3Blocal_write%3Dn"
	leaf    = "file,gridftp_multicast:"
)

func parse(t *testing.T, spec string) Options {
	t.Helper()
	entries, err := stack.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || (entries[1].Name != Name && entries[1].Name != Alias) {
		t.Fatalf("entries %+v", entries)
	}
	o, err := ParseOptions(entries[1])
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestParseObserved(t *testing.T) {
	c2 := "ftp://127.0.0.1:50213/data/mc2/big.bin?"
	c3 := "ftp://127.0.0.1:50214/data/mc3/big.bin?"
	tests := []struct {
		spec string
		want Options
	}{
		{guc2, Options{URLs: []string{c2, c3}, CC: 2, P: 1, LocalWrite: true}},
		{gucOpts, Options{URLs: []string{c2 + "local_write=n", c3}, CC: 1, P: 2, LocalWrite: true}},
		{fwdBC, Options{URLs: []string{c3}, CC: 2, P: 1, LocalWrite: false}},
		{leaf, Options{CC: 2, P: 1, LocalWrite: true}},
		{"file,forward:local_write=false;tcpbs=131072;subject=/CN=x;urls=|ftp://h/x", Options{URLs: []string{"ftp://h/x"}, CC: 2, P: 1}},
		{"file,forward:local_write=n;part=y;urls=|ftp://h/x", Options{URLs: []string{"ftp://h/x"}, CC: 2, P: 1, Part: true}},
		{Options{URLs: []string{"ftp://h/x"}, CC: 1, P: 1, Part: true}.Spec(), Options{URLs: []string{"ftp://h/x"}, CC: 1, P: 1, Part: true}}, // a relay
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got := parse(t, tt.spec)
			if !slices.Equal(got.URLs, tt.want.URLs) || got.CC != tt.want.CC || got.P != tt.want.P || got.LocalWrite != tt.want.LocalWrite || got.Part != tt.want.Part {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseHop(t *testing.T) {
	tests := []struct {
		raw, addr, path string
		cc              int
		write, gsi      bool
	}{
		{raw: "ftp://h/x", addr: "h:21", path: "/x", cc: DefaultCC, write: true},
		{raw: "gsiftp://[::1]/d/x?cc=1", addr: "[::1]:2811", path: "/d/x", cc: 1, write: true, gsi: true},
		{raw: "ftp://u:p%3Bw@h:2/b c?local_write=n", addr: "h:2", path: "/b c", cc: DefaultCC},
	}
	for _, tt := range tests {
		h, err := ParseHop(tt.raw)
		if err != nil || h.URL.Addr() != tt.addr || h.URL.Path != tt.path || h.Own.CC != tt.cc || h.Own.LocalWrite != tt.write || h.URL.GSI() != tt.gsi {
			t.Errorf("ParseHop(%q) = %+v, %v", tt.raw, h, err)
		}
	}
}

func TestWithOptions(t *testing.T) {
	for _, tt := range []struct{ cc, p, wantCC, wantP int }{{1, 1, 1, 1}, {3, 8, 3, 8}, {2, 0, 2, 1}} {
		raw := WithOptions("gsiftp://u@h:2/a b", tt.cc, tt.p)
		h, err := ParseHop(raw)
		if err != nil || h.Own.CC != tt.wantCC || h.Own.P != tt.wantP || h.URL.Path != "/a b" || !h.Own.LocalWrite {
			t.Errorf("ParseHop(%q) = %+v, %v; want cc=%d P=%d", raw, h, err, tt.wantCC, tt.wantP)
		}
	}
}

func TestParseRefused(t *testing.T) {
	for _, opts := range []string{
		"bogus=1", "cc=0", "local_write=n", "P=x", "local_write=maybe", "part=maybe",
		"urls=#http://h/x", "urls=#ftp%253A//h:1/x?bogus%253D1", "urls=#ftp%253A//h:1",
		"urls=#ftp%253A//h%253A99999/x", "urls=#ftp%253A//%253A21/x", "urls=#sshftp%253A//h/x",
	} {
		e := stack.Entry{Name: Name}
		entries, err := stack.Parse("file," + Name + ":" + opts)
		if err == nil {
			e = entries[1]
		}
		if _, err := ParseOptions(e); err == nil {
			t.Errorf("%s: accepted", opts)
		}
	}
}

// The stack a hop sends its child is the one GCT sent in the same place.
func TestChildStackObserved(t *testing.T) {
	o := parse(t, gucOpts) // B, cc=1: its one child C takes D
	p := Plan(o.URLs, o.CC)
	if len(p) != 1 {
		t.Fatalf("plan %+v", p)
	}
	if got := p[0].Stack(); got != fwdBC {
		t.Errorf("B -> C stack\n got %s\nwant %s", got, fwdBC)
	}
	// GCT sends a leaf "file,gridftp_multicast:"; ferry sends plain file,
	// which any server takes, unless the leaf is told not to write.
	for u, want := range map[string]string{
		"ftp://127.0.0.1:50214/data/mc3/big.bin?":              "file",
		"ftp://127.0.0.1:50214/data/mc3/big.bin?cc=3;P=2":      "file",
		"ftp://127.0.0.1:50214/data/mc3/big.bin?local_write=n": "file," + Name + ":local_write%3Dn",
	} {
		if got := (Child{URL: u}).Stack(); got != want {
			t.Errorf("leaf %s: stack %s, want %s", u, got, want)
		}
	}
	// What a child is sent, it reads back: its subtree and its own options.
	back := parse(t, Child{URL: "ftp://h:1/a?cc=1;P=3", Sub: []string{"ftp://u:p%3Bw@h:2/b c?local_write=n", "ftp://h:3/c?"}}.Stack())
	if !slices.Equal(back.URLs, []string{"ftp://u:p%3Bw@h:2/b c?local_write=n", "ftp://h:3/c?"}) || back.CC != 1 || back.P != 3 {
		t.Errorf("round trip %+v", back)
	}
}

func TestPlan(t *testing.T) {
	u := strings.Fields("a b c d e f g")
	tests := []struct {
		n, cc int
		want  string
	}{
		{0, 2, ""},
		{1, 2, "a:"},
		{2, 2, "a: b:"},
		{3, 1, "a:b,c"},
		{3, 2, "a:c b:"},
		{4, 2, "a:c,d b:"},
		{5, 2, "a:c,d,e b:"},
		{7, 2, "a:c,d,e,f b:g"},
		{7, 3, "a:d,e,f b:g c:"},
		{2, 5, "a: b:"},
	}
	for _, tt := range tests {
		var got []string
		for _, c := range Plan(u[:tt.n], tt.cc) {
			got = append(got, c.URL+":"+strings.Join(c.Sub, ","))
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("Plan(%d urls, cc=%d) = %q, want %q", tt.n, tt.cc, s, tt.want)
		}
	}
}

func TestReportRead(t *testing.T) {
	dests := []string{"ftp://u:xxxxx@h:2/a", "gsiftp://[::1]:2811/b"}
	lines := strings.Split(Report(dests), "\n")
	for i := range lines {
		lines[i] = "451-" + lines[i] // as a server's reply holds them
	}
	got, ok := Undelivered(&gridftp.Error{Reply: gridftp.Reply{Code: 451, Lines: append(lines, "451 End.")}})
	if !ok || !slices.Equal(got, dests) {
		t.Errorf("Undelivered(Report(%q)) = %q, %v", dests, got, ok)
	}
}
