package server

import (
	"testing"
	"time"
)

// SetRDELWindow makes a pass of SITE RDEL remove at most n entries before
// it counts the directory, until the test t ends.
func SetRDELWindow(t testing.TB, n int) {
	old := rdelWindow
	rdelWindow = n
	t.Cleanup(func() { rdelWindow = old })
}

// SetGrowClock sets the Clock of the growth of s's sends
// (gridftp.Growth): when a send had moved the given bytes over the given
// number of streams.
func SetGrowClock(s *Server, clock func(streams int, moved int64) time.Time) { s.growClock = clock }
