package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// TestServeConn: one connection (ferry gridftp --stdio's stdin and stdout)
// is served as a session, and ServeConn returns when it ends.
func TestServeConn(t *testing.T) {
	fsys, err := posix.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{FS: fsys, Anonymous: true}
	ours, theirs := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(theirs) }()
	ours.SetDeadline(time.Now().Add(replyTimeout))
	r := bufio.NewReader(ours)
	for _, step := range []struct {
		send string
		want int
	}{
		{"", gridftp.CodeReady},
		{"USER anonymous", gridftp.CodeNeedPassword},
		{"PASS x", gridftp.CodeLoggedIn},
		{"QUIT", gridftp.CodeClosing},
	} {
		if step.send != "" {
			io.WriteString(ours, step.send+"\r\n")
		}
		rep, err := gridftp.ReadReply(r)
		if err != nil || rep.Code != step.want {
			t.Fatalf("%q: %v %v, want %d", step.send, rep, err, step.want)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(replyTimeout):
		t.Fatal("ServeConn did not return when its session ended")
	}
	srv.Close()
	if err := srv.ServeConn(ours); !errors.Is(err, server.ErrServerClosed) {
		t.Fatalf("ServeConn after Close: %v", err)
	}
}
