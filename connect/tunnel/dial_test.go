package tunnel

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echoConn echoes what c sends, then closes it.
func echoConn(c net.Conn) {
	io.Copy(c, c)
	c.Close()
}

// upgrader answers upgrades to Upgrade at /relay by echoing the
// connection, and anything else with 404.
func upgrader(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/relay" || r.Header.Get("Upgrade") != Upgrade || !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
		http.NotFound(w, r)
		return
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	io.WriteString(c, UpgradeReply)
	go echoConn(c)
}

func TestDial(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(upgrader))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(upgrader))
	defer secure.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go echoConn(c)
		}
	}()
	trusting := Dialer{TLS: &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}}

	for _, c := range []struct {
		name, url string
		d         Dialer
		err       string // "": it connects
	}{
		{"upgrade over http", plain.URL + "/relay", Dialer{}, ""},
		{"upgrade over https", secure.URL + "/relay", trusting, ""},
		{"own port", "tcp://" + ln.Addr().String(), Dialer{}, ""},
		{"no relay route", plain.URL + "/elsewhere", Dialer{}, "404"},
		{"untrusted https", secure.URL + "/relay", Dialer{}, "certificate"},
		{"scheme", "ftp://" + ln.Addr().String(), Dialer{}, "want tcp://"},
		{"no host", "tcp:///x", Dialer{}, "want tcp://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			conn, err := c.d.Dial(ctx, c.url)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Dial: %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The connection is the server's from the first byte on: the
			// client speaks first, as TLS and data joins do.
			if _, err := io.WriteString(conn, "ping"); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("echo %q, %v", buf, err)
			}
		})
	}
}
