// Package connlimit counts the connections a server holds, in all and by
// client address, and refuses one past either limit, so that one address
// cannot take every place a server has: ferry gridftp's sessions, the SSH
// gateway's connections that have not logged in.
package connlimit

import (
	"errors"
	"sync"
)

// Refusals of Counter.Take.
var (
	ErrTotal   = errors.New("too many connections")
	ErrAddress = errors.New("too many connections from one address")
)

// Counter counts connections by client address. The zero value is ready
// to use; it is safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	total  int
	byAddr map[string]int
}

// Take counts a connection from addr (a client address's key, such as
// throttle.AddressKey gives) in, unless total connections (when total > 0)
// or perAddr connections from addr (when perAddr > 0) are held already:
// then it fails with ErrTotal or ErrAddress. Each Take that succeeds is
// ended by one Give.
func (c *Counter) Take(addr string, total, perAddr int) error {
	return c.TakeN(addr, 1, total, perAddr)
}

// TakeN counts n connections from addr in at once, or none: it fails as
// Take does when n more would pass total or perAddr. Each TakeN that
// succeeds is ended by a GiveN of the same n.
func (c *Counter) TakeN(addr string, n, total, perAddr int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case total > 0 && c.total+n > total:
		return ErrTotal
	case perAddr > 0 && c.byAddr[addr]+n > perAddr:
		return ErrAddress
	}
	if c.byAddr == nil {
		c.byAddr = map[string]int{}
	}
	c.total += n
	c.byAddr[addr] += n
	return nil
}

// Give counts a connection from addr out.
func (c *Counter) Give(addr string) { c.GiveN(addr, 1) }

// GiveN counts n connections from addr out.
func (c *Counter) GiveN(addr string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total -= n
	if c.byAddr[addr] -= n; c.byAddr[addr] <= 0 {
		delete(c.byAddr, addr)
	}
}

// Total is the number of connections held.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
