package agent

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"ferry/connect/tunnel"
)

// tunnelTo starts a tunnel as the agent's, to a relay whose side serves
// the listen stream with serve; it returns the agent.
func tunnelTo(t *testing.T, serve func(*tunnel.Stream)) *Agent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	agentSide, relaySide := tunnel.Client(c), tunnel.Server(s)
	t.Cleanup(func() { agentSide.Close(); relaySide.Close() })
	go func() {
		for {
			st, err := relaySide.Accept()
			if err != nil {
				return
			}
			go serve(st)
		}
	}()
	return &Agent{sess: agentSide, relay: "tcp://" + ln.Addr().String()}
}

// The agent asks the relay for a passive listener naming whom it admits,
// as its server says.
func TestListenRequest(t *testing.T) {
	from := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.7")}
	for _, c := range []struct {
		name string
		from []netip.Addr
		want tunnel.Listen
	}{
		{"named senders", from, tunnel.Listen{From: from}},
		{"any", nil, tunnel.Listen{Any: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan tunnel.Listen, 1)
			a := tunnelTo(t, func(st *tunnel.Stream) {
				var l tunnel.Listen
				if st.Kind() != tunnel.KindListen || tunnel.ReadLine(st, &l) != nil {
					st.Close()
					return
				}
				got <- l
				tunnel.WriteLine(st, tunnel.Passive{Addr: "198.51.100.1:50000"})
			})
			ln, err := a.listen(c.from)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			l := <-got
			if l.Any != c.want.Any || !slices.Equal(l.From, c.want.From) {
				t.Fatalf("the relay was asked %+v, want %+v", l, c.want)
			}
			if ln.Addr().String() != "198.51.100.1:50000" {
				t.Fatalf("listener at %v", ln.Addr())
			}
		})
	}
}
