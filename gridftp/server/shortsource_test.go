package server_test

import (
	"context"
	"net"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage"
)

// liar is a driver whose Stat reports files longer than they are, as when a
// file shrinks between the Stat and the reads of a RETR.
type liar struct {
	storage.Driver
	extra int64
}

func (l liar) Stat(ctx context.Context, name string) (storage.Info, error) {
	info, err := l.Driver.Stat(ctx, name)
	if err == nil && info.Mode.IsRegular() {
		info.Size += l.extra
	}
	return info, err
}

// TestRetrSourceShrinks: a RETR that cannot read as many bytes as it
// announced must fail, never pad the file with stale buffer bytes.
func TestRetrSourceShrinks(t *testing.T) {
	env := startServer(t, func(s *server.Server) {
		s.BlockSize = 1000
		s.FS = liar{Driver: s.FS, extra: 700}
	})
	data := pattern(4500)
	env.file("f", data)
	c := env.login()

	_, final, got := tryRetr(t, c, "RETR f")
	if final.Code/100 != 4 || len(got) > len(data) {
		t.Errorf("stream RETR of a shrunk file: %q with %d bytes", final.String(), len(got))
	}

	c.expect("MODE E", 200)
	a := c.port()
	c.send("RETR f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("RETR: %q", r.String())
	}
	dc := a.accept()
	var n int
	for {
		h, err := gridftp.ReadHeader(dc)
		if err != nil || h.Desc&gridftp.DescEOD != 0 {
			break
		}
		p := make([]byte, h.Count)
		if _, err := readFull(dc, p); err != nil {
			break
		}
		n += len(p)
	}
	if _, final := c.final(); final.Code/100 != 4 {
		t.Errorf("MODE E RETR of a shrunk file: %q after %d bytes", final.String(), n)
	}
	if n > len(data) {
		t.Errorf("MODE E RETR sent %d bytes of a %d-byte file", n, len(data))
	}
}

func readFull(c net.Conn, p []byte) (int, error) {
	var n int
	for n < len(p) {
		m, err := c.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
