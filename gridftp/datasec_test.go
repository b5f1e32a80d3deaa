package gridftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestSecureDataBarePayload: with PROT C the payload follows the handshake
// at once, from either end, and none of it is lost; with PROT P it goes
// over TLS. A connection with another credential is refused.
func TestSecureDataBarePayload(t *testing.T) {
	cred, err := NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	for _, private := range []bool{false, true} {
		for _, connectorSends := range []bool{true, false} {
			a, b := tcpPair(t) // a connected, b accepted
			ctx := context.Background()
			type result struct {
				c   net.Conn
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := SecureData(ctx, b, cred, false, private, 5*time.Second)
				if err == nil && !connectorSends {
					_, err = c.Write(payload)
					c.Close()
				}
				done <- result{c, err}
			}()
			ca, err := SecureData(ctx, a, cred, true, private, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := TCPConn(ca); !ok || tc != a {
				t.Fatalf("TCPConn of the private=%v connection: %v, %v", private, tc, ok)
			}
			var recv net.Conn
			if connectorSends {
				go func() { ca.Write(payload); ca.Close() }()
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				recv = r.c
			} else {
				recv = ca
			}
			got, err := io.ReadAll(recv)
			if !connectorSends {
				if r := <-done; r.err != nil {
					t.Fatal(r.err)
				}
			}
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("private=%v connectorSends=%v: got %d bytes (%v), want %d", private, connectorSends, len(got), err, len(payload))
			}
		}
	}
	a, b := tcpPair(t)
	go SecureData(context.Background(), b, cred, false, false, 5*time.Second)
	if _, err := SecureData(context.Background(), a, other, true, false, 5*time.Second); !errors.Is(err, ErrDataAuth) {
		t.Fatalf("another credential: %v, want ErrDataAuth", err)
	}
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
