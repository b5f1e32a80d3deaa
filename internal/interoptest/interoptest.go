// Package interoptest decides whether the tests that need the peers run:
// the programs from outside Go that ferry works with or is tested
// against (the GCT globus-gridftp-server and globus-url-copy, gfal2, lftp,
// curl, OpenSSH, the GSI tools and MyProxy, PostgreSQL, aiosmtpd,
// chromium). Those tests build only with the interop tag
// (`go test -tags interop ./...`, as `make test` runs them), so that
// plain `go test ./...` runs the others with no peers installed. A build
// tag rather than -short: `go test ./...` is then the run that needs
// nothing, the peers' tests are not even compiled into it, and -short
// keeps its meaning (`make test-fast` also leaves out the few tests that
// make thousands of files).
//
// Built with the tag, a test whose peer is missing skips, unless
// FERRY_INTEROP=required (set by .ci/run), when it fails; so does one
// built without the tag.
package interoptest

import (
	"os"
	"testing"
)

// Required reports whether a missing peer fails a test rather than
// skipping it: FERRY_INTEROP=required.
func Required() bool { return os.Getenv("FERRY_INTEROP") == "required" }

// Need skips t unless the test binary was built with the interop tag,
// or fails it under FERRY_INTEROP=required: a run that must test the
// peers does not pass without them.
func Need(t testing.TB) {
	t.Helper()
	if !Enabled {
		Missing(t, "this test needs the peers: it runs with go test -tags interop (make test)")
	}
}

// Missing skips t because a peer is missing, msg saying which and how to
// install it, or fails it under FERRY_INTEROP=required.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatalf("FERRY_INTEROP=required: %s", msg)
	}
	t.Skip(msg)
}
