//go:build interop

package interop

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMulticastPasswordNotLogged: a multicast child's URL carries its
// user's password (ftp://user:pass@host), in the -MC file of
// globus-url-copy and in the tree ferry copy plans. The hop's server,
// run with --log-level debug (every command logged), and the child's,
// never write the password, however deep in a stack's options it is
// encoded; nor does ferry copy print it. The copies arrive, so the
// password was used.
func TestMulticastPasswordNotLogged(t *testing.T) {
	needTools(t)
	const user, pass = "mc", "Sekr1t-mc-pw"
	pwfile := filepath.Join(t.TempDir(), "passwd")
	ferryPasswd(t, pwfile, user, pass)
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 3<<20+17)

	head := startFerryMC(t, true)
	kid := startFerryConfig(t, ferryConfig{Args: []string{"--password-file", pwfile, "--log-level", "debug"}})
	kid.debug = true
	// The head's children (cc=2, the first filled up first): a
	// relay-only hop, with a destination below it whose URL is encoded
	// once more inside the stack the head sends the relay, and a leaf.
	relay := startFerryMC(t, true)
	guc(t, "-MC", mcFile(t, relay.URL("f")+"?local_write=n", userURL(t, kid, user, pass, "f"), userURL(t, kid, user, pass, "g")), fileURL(src), head.URL("f"))
	sameCopies(t, src, "f", head, kid)
	sameCopies(t, src, "g", kid)

	r := runFerryCLI(t, 2*time.Minute, nil, "", "copy", "--fanout", "1", src, head.URL("c"), userURL(t, kid, user, pass, "c"))
	if r.code != 0 {
		t.Fatalf("ferry copy to a multicast head and a password child:\n%s", r)
	}
	sameCopies(t, src, "c", head, kid)
	if out := r.stdout + r.stderr; strings.Contains(out, pass) {
		t.Errorf("ferry copy printed the password:\n%s", out)
	}

	for _, s := range []*ferryServer{head, relay, kid} {
		log := s.log.String()
		if !strings.Contains(log, "SETDISKSTACK") && s != kid {
			t.Errorf("%s: no debug log of the stack; the test sees nothing", s.Addr())
		}
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, pass) || strings.Contains(l, url.QueryEscape(pass)) {
				t.Errorf("%s logged the password: %s", s.Addr(), l)
			}
		}
	}
}
