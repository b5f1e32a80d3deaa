package tunnel

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair returns both ends of a session over a loopback TCP connection.
func pair(t testing.TB) (client, server *Session) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client, server = Client(c), Server(<-accepted)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// echo serves every stream the session accepts by echoing it.
func echo(s *Session) {
	for {
		st, err := s.Accept()
		if err != nil {
			return
		}
		go func() {
			io.Copy(st, st)
			st.Close()
		}()
	}
}

func TestStreamsBothWays(t *testing.T) {
	client, server := pair(t)
	go echo(client)
	go echo(server)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := client
			if i%2 == 1 {
				s = server
			}
			st, err := s.Open(KindGridFTP)
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			want := make([]byte, 300<<10) // several windows
			rand.Read(want)
			go st.Write(want)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(st, got); err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, want) {
				t.Error("echo differs")
			}
		}()
	}
	wg.Wait()
	// Both ends forget closed streams.
	waitFor(t, func() bool { return client.Streams() == 0 && server.Streams() == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("condition not met in 5 s")
		}
	}
}

// A peer that does not read holds the writer to one window: memory per
// stream is bounded.
func TestFlowControl(t *testing.T) {
	client, server := pair(t)
	st, err := client.Open(KindGridFTP)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := server.Accept()
	if err != nil {
		t.Fatal(err)
	}
	st.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := st.Write(make([]byte, 1<<20))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write to a peer that does not read: %d, %v; want a timeout", n, err)
	}
	if want := Window - 1 - len(KindGridFTP); n != want { // the kind took the rest
		t.Fatalf("wrote %d bytes before blocking, want the window's %d", n, want)
	}
	// Reading frees the window again.
	st.SetWriteDeadline(time.Time{})
	go io.Copy(io.Discard, peer)
	if _, err := st.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
}

func TestReadDeadlineAndClose(t *testing.T) {
	client, server := pair(t)
	st, _ := client.Open(KindListen)
	peer, _ := server.Accept()
	if peer.Kind() != KindListen {
		t.Fatalf("kind %q", peer.Kind())
	}
	st.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := st.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v", err)
	}
	st.SetReadDeadline(time.Time{})
	peer.Write([]byte("bye"))
	peer.Close()
	got, err := io.ReadAll(st)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want bye then EOF", got, err)
	}
	st.Close()
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a stream closed here: %v; want net.ErrClosed", err)
	}
	waitFor(t, func() bool { return client.Streams() == 0 && server.Streams() == 0 })
}

// A passed deadline fails a blocked Read or Write with an error that wraps
// os.ErrDeadlineExceeded and is a net.Error whose Timeout is true, as
// net.Conn says: the GridFTP server tells an idle timeout so.
func TestDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(*Stream) error
	}{
		{"read", func(st *Stream) error {
			st.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := st.Read(make([]byte, 1))
			return err
		}},
		{"write", func(st *Stream) error { // more than the window, to a peer that does not read
			st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := st.Write(make([]byte, 4*Window))
			return err
		}},
		{"both", func(st *Stream) error {
			st.SetDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := st.Read(make([]byte, 1))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t)
			st, err := client.Open(KindGridFTP)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := server.Accept(); err != nil {
				t.Fatal(err)
			}
			err = tc.op(st)
			var ne net.Error
			if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("past the deadline: %v; want os.ErrDeadlineExceeded, a timeout", err)
			}
		})
	}
}

// Close fails a Read or Write blocked on the stream at once, as net.Conn
// says, and the peer reads EOF.
func TestCloseWakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(*Stream) error
	}{
		{"read", func(st *Stream) error { _, err := st.Read(make([]byte, 1)); return err }},
		{"write", func(st *Stream) error { _, err := st.Write(make([]byte, 4*Window)); return err }}, // to a peer that does not read
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t)
			st, err := client.Open(KindGridFTP)
			if err != nil {
				t.Fatal(err)
			}
			peer, err := server.Accept()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- tc.op(st) }()
			time.Sleep(50 * time.Millisecond) // let it block (if it ends before, so much the better)
			st.Close()
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Fatalf("blocked on a stream closed here: %v; want net.ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("still blocked 5 s after Close")
			}
			if _, err := io.Copy(io.Discard, peer); err != nil {
				t.Fatalf("the peer reads %v; want EOF", err)
			}
		})
	}
}

// Streams end when their session does, and a session holds at most
// MaxStreams.
func TestSessionEnd(t *testing.T) {
	client, server := pair(t)
	var streams []*Stream
	for range MaxStreams {
		st, err := client.Open(KindGridFTP)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	if _, err := client.Open(KindGridFTP); err == nil {
		t.Fatalf("stream %d opened", MaxStreams+1)
	}
	server.Close()
	<-client.Done()
	if _, err := streams[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a dead session succeeded")
	}
	if _, err := client.Open(KindGridFTP); err == nil {
		t.Fatal("open on a dead session succeeded")
	}
}

// Raw yamux frames, for tests that play a peer: a frame is version 0,
// type, flags, stream ID, length, payload.
const (
	typeData, typeWindowUpdate = 0, 1
	flagSYN, flagFIN           = 1, 4
)

func rawFrame(w io.Writer, typ byte, flags uint16, id uint32, p []byte) {
	h := make([]byte, 12)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:4], flags)
	binary.BigEndian.PutUint32(h[4:8], id)
	binary.BigEndian.PutUint32(h[8:12], uint32(len(p)))
	w.Write(append(h, p...))
}

// rawOpen opens stream id of kind as a peer does.
func rawOpen(w io.Writer, id uint32, kind string) {
	rawFrame(w, typeWindowUpdate, flagSYN, id, nil)
	rawFrame(w, typeData, 0, id, append([]byte{byte(len(kind))}, kind...))
}

// A peer that sends past the window breaks the session.
func TestWindowViolation(t *testing.T) {
	a, b := net.Pipe()
	s := Server(a)
	defer s.Close()
	go io.Copy(io.Discard, b)
	rawOpen(b, 1, KindListen)
	if _, err := s.Accept(); err != nil {
		t.Fatal(err)
	}
	for range Window/(16<<10) + 1 {
		rawFrame(b, typeData, 0, 1, make([]byte, 16<<10))
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session survived a window violation")
	}
}

// A peer that opens more than MaxStreams has the one too many closed.
func TestPeerPastMaxStreams(t *testing.T) {
	a, b := net.Pipe()
	s := Server(a)
	defer s.Close()
	fins := make(chan uint32, MaxStreams+1)
	go func() { // the session's frames: the streams it closes
		h := make([]byte, 12)
		for {
			if _, err := io.ReadFull(b, h); err != nil {
				return
			}
			if h[1] == typeData {
				io.CopyN(io.Discard, b, int64(binary.BigEndian.Uint32(h[8:12])))
			}
			if binary.BigEndian.Uint16(h[2:4])&flagFIN != 0 {
				fins <- binary.BigEndian.Uint32(h[4:8])
			}
		}
	}()
	for i := range uint32(MaxStreams + 1) {
		rawOpen(b, 2*i+1, KindListen)
		if i == MaxStreams {
			break
		}
		if _, err := s.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-fins:
		if id != 2*MaxStreams+1 {
			t.Fatalf("stream %d closed; want only the last, %d", id, 2*MaxStreams+1)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("stream %d of a peer past MaxStreams not closed", 2*MaxStreams+1)
	}
}

// BenchmarkStreams is the throughput of n streams at once through a
// session over loopback TCP, each writing 32 KiB at a time to a peer that
// discards it.
func BenchmarkStreams(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			client, server := pair(b)
			go func() {
				for {
					st, err := server.Accept()
					if err != nil {
						return
					}
					go io.Copy(io.Discard, st)
				}
			}()
			streams := make([]*Stream, n)
			for i := range streams {
				st, err := client.Open(KindGridFTP)
				if err != nil {
					b.Fatal(err)
				}
				streams[i] = st
			}
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, st := range streams {
				wg.Go(func() {
					for j := i; j < b.N; j += n {
						if _, err := st.Write(buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
