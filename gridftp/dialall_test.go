package gridftp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDialAll: the dials run at once and come back in order; a failure
// stops the rest, closes what was made and is the error returned.
func TestDialAll(t *testing.T) {
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
			defer c.Close()
		}
	}()
	var d net.Dialer
	// Each dial waits for all four to have begun: one after another they
	// would never finish.
	var begun sync.WaitGroup
	begun.Add(4)
	together := func(ctx context.Context, i int) (net.Conn, error) {
		begun.Done()
		begun.Wait()
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return nil, err
		}
		return &closeCounter{c, new(atomic.Int32), i}, nil
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		conns, err = DialAll(context.Background(), 4, together)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("DialAll dials one after another")
	}
	if err != nil || len(conns) != 4 {
		t.Fatalf("DialAll: %d conns, %v", len(conns), err)
	}
	for i, c := range conns {
		if c.(*closeCounter).i != i {
			t.Fatalf("connection %d is dial %d's", i, c.(*closeCounter).i)
		}
		c.Close()
	}

	refused := errors.New("refused")
	var closed atomic.Int32
	var made sync.WaitGroup
	made.Add(2)
	conns, err = DialAll(context.Background(), 4, func(ctx context.Context, i int) (net.Conn, error) {
		if i == 2 {
			made.Wait()
			return nil, refused
		}
		if i == 3 {
			<-ctx.Done() // stopped by the failure
			return nil, ctx.Err()
		}
		defer made.Done()
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return nil, err
		}
		return &closeCounter{c, &closed, i}, nil
	})
	if !errors.Is(err, refused) || conns != nil {
		t.Fatalf("with a failure: %v, %v; want refused", conns, err)
	}
	if closed.Load() != 2 {
		t.Fatalf("%d of the 2 connections made were closed", closed.Load())
	}
}

type closeCounter struct {
	net.Conn
	n *atomic.Int32
	i int
}

func (c *closeCounter) Close() error { c.n.Add(1); return c.Conn.Close() }
