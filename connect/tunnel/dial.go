package tunnel

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"
)

// Upgrade is the protocol an HTTP connection to the service's relay route
// upgrades to (Connection: Upgrade, Upgrade: Upgrade): after the server's
// 101 answer, the connection carries what a relay's own port would.
const Upgrade = "ferry-relay/1"

// UpgradeReply is the server's answer that accepts an upgrade.
const UpgradeReply = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Upgrade + "\r\n\r\n"

// maxReplyHeader bounds the header of the answer to an upgrade.
const maxReplyHeader = 8 << 10

// Dialer opens connections to relays, named by relay URLs: tcp://HOST:PORT
// for a relay on a port of its own, or the http:// or https:// URL of the
// service's relay route, where the connection is upgraded (Upgrade).
type Dialer struct {
	// TLS configures https:// URLs; nil: the system's roots, and the
	// URL's host as the server's name.
	TLS *tls.Config
}

// Dial opens a connection to the relay at relayURL, ready for the relay's
// protocol: a TLS handshake, or a data join.
func (d Dialer) Dial(ctx context.Context, relayURL string) (net.Conn, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return nil, fmt.Errorf("relay URL: %w", err)
	}
	port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if u.Scheme != "tcp" && port == "" || u.Host == "" {
		return nil, fmt.Errorf("relay URL %q: want tcp://HOST:PORT, or an http:// or https:// URL", relayURL)
	}
	addr := u.Host
	if u.Port() == "" && port != "" {
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil || u.Scheme == "tcp" {
		return c, err
	}
	if u.Scheme == "https" {
		conf := d.TLS
		if conf == nil {
			conf = &tls.Config{ServerName: u.Hostname()}
		}
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", relayURL, err)
		}
		c = tc
	}
	if err := upgrade(ctx, c, u); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", relayURL, err)
	}
	return c, nil
}

// upgrade asks the HTTP server at the other end of c to hand it over to
// its relay, and reads its answer up to its end and no further.
func upgrade(ctx context.Context, c net.Conn, u *url.URL) error {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: " + Upgrade + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	var head []byte
	var b [1]byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if len(head) >= maxReplyHeader {
			return fmt.Errorf("the answer to the relay upgrade is too long")
		}
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return fmt.Errorf("the answer to the relay upgrade: %w", err)
		}
		head = append(head, b[0])
	}
	status, _, _ := bytes.Cut(head, []byte("\r\n"))
	if _, code, _ := bytes.Cut(status, []byte(" ")); !bytes.HasPrefix(code, []byte("101 ")) {
		return fmt.Errorf("no relay there: the service answered %q", status)
	}
	return nil
}

// Prefixed is c with head put back before what is still to be read: the
// bytes a server read to tell what the connection is.
func Prefixed(c net.Conn, head []byte) net.Conn { return &prefixed{Conn: c, head: head} }

type prefixed struct {
	net.Conn
	head []byte
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
