//go:build interop

package interop

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

// TestGSIMulticast: a multicast tree of GSI servers, each hop logging in
// to the next with the credential its client delegated to it (and
// delegating it on): globus-url-copy -MC down a chain ferry → ferry →
// GCT, and ferry copy to three gsiftp:// destinations, which it sends
// through a tree. A hop whose session has no delegated credential (an
// anonymous one) refuses gsiftp:// children with a reply that says why.
func TestGSIMulticast(t *testing.T) {
	needGSITools(t)
	u := newGSIUser(t, "ca1", "alice")
	gm := map[string]string{u.DN: "alice"}
	head, kid := startFerryGSI(t, u, gm, "--multicast"), startFerryGSI(t, u, gm, "--multicast")
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	src := mcSource(t)

	gucGSI(t, u.Proxy, u.CA.Dir, "-MC", mcFile(t, gsiURL(head, "f")+"?cc=1", gsiURL(kid, "d/f")+"?cc=1", gct.URL("g")), fileURL(src))
	sameCopies(t, src, "f", head)
	sameCopies(t, src, "d/f", kid)
	sameCopies(t, src, "g", gct)

	env := gsiEnv("X509_USER_PROXY="+u.Proxy, "X509_CERT_DIR="+u.CA.Dir)
	r := runFerryCLI(t, 2*time.Minute, env, "", "copy", "--verify-checksum", "--fanout", "1",
		src, gsiURL(head, "e"), gsiURL(kid, "e"), gct.URL("e"))
	if r.code != 0 {
		t.Fatalf("ferry copy to three gsiftp:// destinations:\n%s", r)
	}
	out := r.stdout + r.stderr
	if !strings.Contains(out, "forwarded, fan-out 1") || strings.Count(out, "1 delivered (0 repaired)") != 3 {
		t.Errorf("the copy did not go through the tree to every destination:\n%s", out)
	}
	sameCopies(t, src, "e", head, kid, gct)

	anon := startFerryMC(t, false)
	out, err := gucErr("-MC", mcFile(t, gsiURL(kid, "x")), fileURL(src), anon.URL("x"))
	if err == nil || !strings.Contains(out, "gsiftp:// needs a GSI login that delegated a credential") {
		t.Fatalf("an anonymous hop with a gsiftp:// child: %v\n%s", err, out)
	}
	if _, err := os.Stat(kid.Path("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused child got a file: %v", err)
	}
}
