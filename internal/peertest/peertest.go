// Package peertest runs servers that are not GridFTP servers (an SSH
// server's banner, an SMTP server's replies, a port that only accepts) on
// loopback, for tests of what a client makes of a peer it did not expect.
package peertest

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"
)

// Serve listens on 127.0.0.1 until the test ends and returns the address.
// Each connection is sent greet, then answer for every line it sends
// (nothing when answer is ""), and is closed when the client closes it or
// after a minute.
func Serve(t testing.TB, greet, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				fmt.Fprint(c, greet)
				for r := bufio.NewScanner(c); r.Scan(); {
					fmt.Fprint(c, answer)
				}
			}()
		}
	}()
	return ln.Addr().String()
}
