// Package servertest starts in-process ferry endpoint servers for the
// tests of other packages: a temporary directory served on 127.0.0.1 for
// as long as the test runs.
package servertest

import (
	"net"
	"testing"

	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// Users is a server.Authenticator with fixed passwords.
type Users map[string]string

// Check reports whether password is user's.
func (u Users) Check(user, password string) bool { p, ok := u[user]; return ok && p == password }

// Root makes a temporary directory and the POSIX driver over it.
func Root(t testing.TB) (string, *posix.FS) {
	t.Helper()
	root := t.TempDir()
	fs, err := posix.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, fs
}

// Serve runs srv on 127.0.0.1 and a free port until the test ends and
// returns its address. Its anonymous sessions may write
// (Server.AnonymousWrite): the tests of other packages store files through
// them.
func Serve(t testing.TB, srv *server.Server) string {
	t.Helper()
	srv.AnonymousWrite = srv.AnonymousWrite || srv.Anonymous
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
