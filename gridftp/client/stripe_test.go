package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

func TestParseStripedPassive(t *testing.T) {
	tests := []struct {
		name string
		rep  gridftp.Reply
		want []string // nil for an error
	}{
		{"gct two stripes", gridftp.Reply{Code: 229, Lines: []string{
			"Entering Striped Passive Mode.", " 127,0,0,1,226,237", " 127,0,0,1,233,247", "End"}},
			[]string{"127.0.0.1:58093", "127.0.0.1:59895"}},
		{"one stripe", gridftp.Reply{Code: 229, Lines: []string{
			"Entering Striped Passive Mode.", " 10,0,0,2,4,1", "End"}},
			[]string{"10.0.0.2:1025"}},
		{"one line", gridftp.Reply{Code: 229, Lines: []string{"Entering Striped Passive Mode (127,0,0,1,4,1)"}},
			[]string{"127.0.0.1:1025"}},
		{"blank lines", gridftp.Reply{Code: 229, Lines: []string{
			"Entering Striped Passive Mode.", " 127,0,0,1,4,1", "", " 127,0,0,1,4,2 ", "End"}},
			[]string{"127.0.0.1:1025", "127.0.0.1:1026"}},
		{"no address", gridftp.Reply{Code: 229, Lines: []string{"Entering Striped Passive Mode.", "End"}}, nil},
		{"bad address", gridftp.Reply{Code: 229, Lines: []string{"Entering Striped Passive Mode.", " 127,0,0,1,4", "End"}}, nil},
		{"EPSV reply", gridftp.Reply{Code: 229, Lines: []string{"Entering Extended Passive Mode (|||52851|)"}}, nil},
		{"not 229", gridftp.Reply{Code: 227, Lines: []string{"Entering Passive Mode (127,0,0,1,4,1)"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aps, err := client.ParseStripedPassive(tt.rep)
			if tt.want == nil {
				if !errors.Is(err, gridftp.ErrBadAddress) {
					t.Fatalf("got %v, %v; want ErrBadAddress", aps, err)
				}
				return
			}
			var got []string
			for _, ap := range aps {
				got = append(got, ap.String())
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestSPORCommand(t *testing.T) {
	for _, tt := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"127.0.0.1:1025"}, "SPOR 127,0,0,1,4,1"},
		{[]string{"10.0.0.1:258", "10.0.0.2:259"}, "SPOR 10,0,0,1,1,2 10,0,0,2,1,3"},
		{[]string{"[::1]:2000", "10.0.0.2:259"}, "SPOR |2|::1|2000| 10,0,0,2,1,3"},
	} {
		var aps []netip.AddrPort
		for _, a := range tt.addrs {
			aps = append(aps, netip.MustParseAddrPort(a))
		}
		if got := client.SPORCommand(aps); got != tt.want {
			t.Errorf("SPORCommand(%v) = %q, want %q", tt.addrs, got, tt.want)
		}
		back, err := gridftp.ParseHostPorts(strings.TrimPrefix(client.SPORCommand(aps), "SPOR "))
		if err != nil || len(back) != len(aps) {
			t.Errorf("%v does not read back: %v, %v", tt.addrs, back, err)
		}
	}
}

// TestStripedPairScripted: a striped pair sends SPAS to the destination,
// SPOR with every stripe's address and the layout to the source; Finish
// adds up the stripes' perf markers and hands on each stripe's ranges.
func TestStripedPairScripted(t *testing.T) {
	src := dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "OPTS RETR Parallelism=2,2,2;StripeLayout=Blocked;BlockSize=1024;Markers=5;",
			"SPOR 127,0,0,1,4,1 127,0,0,1,4,2"},
		"200 MODE E ok.\r\n200 OPTS ok.\r\n200 PORT Command successful.\r\n",
	}, step{[]string{"RETR /a"}, "150 Go.\r\n226 Done.\r\n"}))
	perf := func(stripe, n int) string {
		return fmt.Sprintf("112-Perf Marker\r\n Timestamp:  1.0\r\n Stripe Index: %d\r\n"+
			" Stripe Bytes Transferred: %d\r\n Total Stripe Count: 2\r\n112 End.\r\n", stripe, n)
	}
	dst := dialScripted(t, scripted(t, loginStep, step{
		[]string{"MODE E", "SPAS"},
		"200 MODE E ok.\r\n229-Entering Striped Passive Mode.\r\n 127,0,0,1,4,1\r\n 127,0,0,1,4,2\r\n229 End\r\n",
	}, step{[]string{"STOR /b"}, "150 Go.\r\n" + perf(0, 1024) + perf(1, 1024) +
		"111 Range Marker 0-1024\r\n111 Range Marker 1024-2048\r\n" + perf(0, 2048) + perf(1, 1500) +
		"111 Range Marker 2048-3072\r\n111 Range Marker 3072-3548\r\n226 Done.\r\n"}))
	ctx := context.Background()
	for _, c := range []*client.Conn{src, dst} {
		if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
			t.Fatal(err)
		}
	}
	p := &client.Pair{Src: src, Dst: dst, Striping: &gridftp.Layout{BlockSize: 1024}}
	if err := p.Setup(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if p.Stripes() != 2 {
		t.Fatalf("Stripes() = %d, want 2", p.Stripes())
	}
	part := client.Part{SrcPath: "/a", DstPath: "/b", Length: -1}
	if err := p.Start(part); err != nil {
		t.Fatal(err)
	}
	var totals []int64
	var have gridftp.Ranges
	err := p.Finish(ctx, part, client.Markers{
		Bytes:  func(n int64) { totals = append(totals, n) },
		Ranges: func(rs gridftp.Ranges) { have.AddAll(rs) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1024, 2048, 3072, 3548}; !reflect.DeepEqual(totals, want) {
		t.Errorf("byte totals %v, want %v", totals, want)
	}
	if have.String() != "0-3548" {
		t.Errorf("ranges %s, want 0-3548", have)
	}
}

// TestStripedPairFerry: against ferry's servers, which are not striped,
// a striped pair runs on the one stripe their SPAS gives.
func TestStripedPairFerry(t *testing.T) {
	ctx := context.Background()
	srcAddr, srcRoot := startServer(t)
	dstAddr, dstRoot := startServer(t)
	src, dst := dial(t, srcAddr, 1), dial(t, dstAddr, 1)
	if n, err := dst.Stripes(ctx); err != nil || n != 1 {
		t.Fatalf("Stripes() = %d, %v; want 1", n, err)
	}
	data := randomBytes(t, 3<<20+7)
	if err := os.WriteFile(filepath.Join(srcRoot, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := &client.Pair{Src: src, Dst: dst, Striping: &gridftp.Layout{BlockSize: 256 << 10}}
	if err := p.Setup(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if p.Stripes() != 1 {
		t.Fatalf("Stripes() = %d, want 1", p.Stripes())
	}
	part := client.Part{SrcPath: "/f", DstPath: "/g", Length: -1}
	if err := p.Start(part); err != nil {
		t.Fatal(err)
	}
	if err := p.Finish(ctx, part, client.Markers{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dstRoot, "g")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy differs (%v)", err)
	}
}

func TestParseMovers(t *testing.T) {
	tests := []struct {
		name string
		rep  gridftp.Reply
		want []client.Mover // nil for an error
	}{
		{"two", gridftp.Reply{Code: 200, Lines: []string{"Movers:", " 0 10.0.0.1:2812 up", " 1 10.0.0.2:2812 down connection refused", "End"}},
			[]client.Mover{{Index: 0, Addr: "10.0.0.1:2812", Up: true}, {Index: 1, Addr: "10.0.0.2:2812", Reason: "connection refused"}}},
		{"ipv6", gridftp.Reply{Code: 200, Lines: []string{"Movers", " 0 [::1]:2812 up", "End"}},
			[]client.Mover{{Index: 0, Addr: "[::1]:2812", Up: true}}},
		{"no address", gridftp.Reply{Code: 200, Lines: []string{"Movers", " 0 up", "End"}}, nil},
		{"bad state", gridftp.Reply{Code: 200, Lines: []string{"Movers", " 0 h:1 sideways", "End"}}, nil},
		{"bad index", gridftp.Reply{Code: 200, Lines: []string{"Movers", " x h:1 up", "End"}}, nil},
		{"one line", gridftp.Reply{Code: 200, Lines: []string{"OK"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.ParseMovers(tt.rep)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestMoversNotFrontEnd: a server that is no striped front end refuses
// SITE MOVERS, which Movers reports as no movers.
func TestMoversNotFrontEnd(t *testing.T) {
	addr, _ := startServer(t)
	ms, err := dial(t, addr, 1).Movers(context.Background())
	if err != nil || ms != nil {
		t.Fatalf("Movers() = %v, %v; want none", ms, err)
	}
}
