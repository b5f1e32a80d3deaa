package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
)

// modeEListing is a listing as a sender puts it on a data connection: one
// MODE E block at offset 0, then the EOF of a single stream.
func modeEListing(lines string) []byte {
	var b [2 * gridftp.HeaderLen]byte
	gridftp.Header{Count: uint64(len(lines))}.Put(b[:])
	gridftp.Header{Desc: gridftp.DescEOF | gridftp.DescEOD, Offset: 1}.Put(b[gridftp.HeaderLen:])
	return append(append(b[:gridftp.HeaderLen:gridftp.HeaderLen], lines...), b[gridftp.HeaderLen:]...)
}

// plainLister serves one anonymous session as a server without FEAT
// DATATLS (GCT without GSI, say) serves a listing: it answers whatever
// comes, and for MLSD connects from 127.0.0.1 to the PORT address the
// client sent, once onPort returned, and sends listing.
func plainLister(t *testing.T, listing string, onPort func(netip.AddrPort)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "220 plain\r\n")
		r := bufio.NewReader(c)
		var port netip.AddrPort
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
			switch strings.ToUpper(verb) {
			case "USER":
				io.WriteString(c, "331 Password please.\r\n")
			case "FEAT":
				io.WriteString(c, "211-Features:\r\n PARALLEL\r\n211 End.\r\n")
			case "PORT":
				if port, err = gridftp.ParseHostPort(arg); err != nil {
					io.WriteString(c, "501 Bad PORT.\r\n")
					continue
				}
				onPort(port)
				io.WriteString(c, "200 PORT Command successful.\r\n")
			case "MLSD":
				io.WriteString(c, "150 Opening data connection.\r\n")
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
				dc, err := d.Dial("tcp", port.String())
				if err != nil {
					io.WriteString(c, "425 Cannot open data connection.\r\n")
					continue
				}
				dc.Write(modeEListing(listing))
				dc.Close()
				io.WriteString(c, "226 Transfer Complete.\r\n")
			default:
				io.WriteString(c, "200 OK.\r\n")
			}
		}
	}()
	return ln.Addr().String()
}

// A client listening for a listing (PORT) from a server that cannot
// authenticate its data connections admits only the server's address: a
// stranger who connects first, from another, is closed, and what the
// client lists is the server's.
func TestListingRefusesStrangers(t *testing.T) {
	stranger := make(chan error, 1)
	addr := plainLister(t, "type=file;size=4;modify=20260101000000; real\r\n", func(port netip.AddrPort) {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		c, err := d.Dial("tcp", port.String())
		if err != nil {
			stranger <- err
			return
		}
		defer c.Close()
		c.Write(modeEListing("type=file;size=9;modify=20260101000000; stranger\r\n"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = errors.New("the client kept the stranger's connection")
		} else {
			err = nil
		}
		stranger <- err
	})
	c := dial(t, addr, 1)
	entries, err := c.List(context.Background(), "/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-stranger; err != nil {
		t.Error(err)
	}
	if len(entries) != 1 || entries[0].Name != "real" {
		t.Fatalf("List = %+v; want the server's one entry", entries)
	}
}

// A ferry server's connections to the client's listener prove a
// credential the client made for its session (FEAT DATATLS; DCSC P, DCAU
// A): they are admitted from any address, as a connect agent's, reached
// through a relay, come from one the client does not know. Here the
// control connection goes through a proxy on 127.0.0.5, the data
// connection comes from 127.0.0.1.
func TestListingAuthenticatesFerry(t *testing.T) {
	root, fs := servertest.Root(t)
	os.WriteFile(root+"/listed", []byte("x"), 0o644)
	addr := servertest.Serve(t, &server.Server{FS: fs, Anonymous: true, DataTimeout: 10 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.5:0")
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
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	c := dial(t, ln.Addr().String(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	entries, err := c.List(ctx, "/")
	if err != nil || len(entries) != 1 || entries[0].Name != "listed" {
		t.Fatalf("List = %+v, %v; want the one file", entries, err)
	}
}
