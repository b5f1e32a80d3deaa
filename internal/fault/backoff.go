package fault

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"
)

// Backoff is the wait before another try after failures in a row: Base
// after the first, twice as long after each further one, never longer
// than Max. Each wait is jittered down by up to half, so that tries that
// failed together do not all come back together. Reset starts it again:
// when the endpoint that failed answers again, its next failure waits
// Base, not minutes. The zero value waits 1 s, up to 1 min.
type Backoff struct {
	Base, Max time.Duration
	failures  int
}

// Next counts a failure and says how long to wait before the next try.
func (b *Backoff) Next() time.Duration {
	base, ceiling := b.Base, b.Max
	if base <= 0 {
		base = time.Second
	}
	if ceiling <= 0 {
		ceiling = time.Minute
	}
	d := base
	for range b.failures {
		if d >= ceiling {
			break
		}
		d *= 2
	}
	d = min(d, ceiling)
	b.failures++
	return d - rand.N(d/2+1)
}

// Reset forgets the failures: the next wait is Base again.
func (b *Backoff) Reset() { b.failures = 0 }

// Unanswered reports whether err is the failure of an endpoint that did
// not answer: no connection, a session that broke or timed out, a
// transfer whose data stalled (a net.Error, or an end of file). A
// server's refusal (a reply) is an answer, and so is data that arrived
// damaged.
func Unanswered(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
