package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"strings"
	"testing"

	"ferry/connect/ca"
	"ferry/connect/tunnel"
)

// A relay of the tunnel protocol before yamux (a ferry server older than
// the agent) is told apart at the TLS handshake, and the agent says so.
func TestOlderRelay(t *testing.T) {
	c, err := ca.Generate()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Relay()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{rc}, NextProtos: []string{tunnel.ProtoTunnelOld}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // as an older relay: a Hello, then its own session
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		tunnel.WriteLine(conn, tunnel.Hello{Endpoint: "e1"})
		conn.Read(make([]byte, 1))
	}()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := c.IssueAgent(key.Public(), "e1", 1)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cert: tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}, ca: c.Certificate()}
	up, err := a.serve(context.Background(), newStreamListener(), "tcp://"+ln.Addr().String())
	if up || err == nil || !strings.Contains(err.Error(), "older than this agent") {
		t.Fatalf("tunnel to an older relay: up %v, %v; want an error that says the service is older", up, err)
	}
}
