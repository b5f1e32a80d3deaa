package sshftp

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Conn is a net.Conn over two pipes: it reads from r and writes to w.
// Deadlines work as on a socket (the pipes are non-blocking). Close closes
// both and then runs the owner's clean-up (ending the ssh process).
type Conn struct {
	r, w          *os.File
	local, remote net.Addr
	// explain, when set, turns the end of the input into the reason the
	// other side went away (ssh's error message).
	explain func() error
	// done, when set, is called once by Close after the pipes are closed.
	done      func()
	closeOnce sync.Once
	closeErr  error
}

var _ net.Conn = (*Conn)(nil)

// Read reads from the input pipe. Its end is io.EOF, or the error that
// explains it.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) && c.explain != nil {
		if why := c.explain(); why != nil {
			err = why
		}
	}
	return n, err
}

// Write writes to the output pipe.
func (c *Conn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close closes both pipes, then ends the owner's process (if any).
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
		if c.done != nil {
			c.done()
		}
	})
	return c.closeErr
}

// LocalAddr is this end of the SSH connection.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr is the other end of the SSH connection.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}

// SetReadDeadline bounds Reads.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.r.SetReadDeadline(t) }

// SetWriteDeadline bounds Writes.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }
