package gridftp

import (
	"net"
	"sync"
)

// Accept takes data connections from ln into ch until ln is closed, then
// closes ch. A connection that finds ch full waits for room; once stop is
// closed it is closed instead (a nil stop never is). admit, when set, is
// asked about each connection first, in a goroutine of its own (it may
// take a handshake): it returns the connection to hand on, or an error,
// and then the connection is closed and dropped.
func Accept(ln net.Listener, ch chan<- net.Conn, stop <-chan struct{}, admit func(net.Conn) (net.Conn, error)) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(ch)
	}()
	admitting := make(chan struct{}, MaxStreams)
	hand := func(c net.Conn) bool {
		select {
		case ch <- c:
			return true
		case <-stop:
			c.Close()
			return false
		}
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if admit == nil {
			if !hand(c) {
				return
			}
			continue
		}
		select {
		case admitting <- struct{}{}: // at most MaxStreams at once
		case <-stop:
			c.Close()
			return
		}
		wg.Go(func() {
			defer func() { <-admitting }()
			if c, err := admit(c); err == nil {
				hand(c)
			} else if c != nil {
				c.Close()
			}
		})
	}
}
