//go:build linux

package server

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenDataUnpaced: a passive data listener on loopback, with or
// without a port range, hands out connections that send under a
// congestion control that does not pace (gridftp.DataControl), whatever
// the system's default. On a system whose default already does not pace,
// the test cannot tell the difference and says so.
func TestListenDataUnpaced(t *testing.T) {
	unpaced := []string{"cubic", "reno"}
	for _, tt := range []struct {
		name      string
		low, high int
	}{
		{"any port", 0, 0},
		{"port range", 50000, 50999},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := &Server{PortLow: tt.low, PortHigh: tt.high}
			ln, err := srv.listenData(netip.MustParseAddr("127.0.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			peer, got := congestion(t, c), congestion(t, a)
			if slices.Contains(unpaced, peer) {
				t.Logf("the system's default, %q, does not pace either", peer)
			}
			if !slices.Contains(unpaced, got) {
				t.Errorf("accepted data connection sends under %q, want one of %q", got, unpaced)
			}
		})
	}
}

// congestion names the congestion control of a TCP connection.
func congestion(t *testing.T, c net.Conn) string {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	rc.Control(func(fd uintptr) { name, err = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	if err != nil {
		t.Fatal(err)
	}
	return name
}
