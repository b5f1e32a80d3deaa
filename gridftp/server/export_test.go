package server

import "testing"

// SetRDELWindow makes a pass of SITE RDEL remove at most n entries before
// it counts the directory, until the test t ends.
func SetRDELWindow(t testing.TB, n int) {
	old := rdelWindow
	rdelWindow = n
	t.Cleanup(func() { rdelWindow = old })
}
