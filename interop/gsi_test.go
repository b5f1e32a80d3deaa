//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startFerryGSI starts ferry gridftp --gsi with u's host certificate and
// CA, a grid-mapfile of lines DN → local user, and flags extra.
func startFerryGSI(t *testing.T, u *gsiUser, gridmap map[string]string, extra ...string) *ferryServer {
	t.Helper()
	var lines []string
	for dn, user := range gridmap {
		lines = append(lines, fmt.Sprintf("%q %s", dn, user))
	}
	gm := filepath.Join(t.TempDir(), "grid-mapfile")
	if err := os.WriteFile(gm, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return startFerryConfig(t, ferryConfig{Args: append([]string{"--gsi", "--cert", u.HostCert, "--key", u.HostKey,
		"--ca-dir", u.CA.Dir, "--gridmap", gm}, extra...)})
}

// gsiURL is a gsiftp:// URL of a path under a ferry server's root.
func gsiURL(s *ferryServer, rel string) string {
	return "gsiftp://" + s.addr + "/" + escapePath(strings.TrimPrefix(rel, "/"))
}

// TestGSIFerryServerGUC: globus-url-copy with a proxy from grid-proxy-init
// puts into and gets from ferry's GSI server: stream mode, 4 streams,
// PROT P (the data channels authenticated with the credential the client
// delegated, as GCT's are); a DN the grid-mapfile lacks and a proxy of a
// CA the server does not trust are refused.
func TestGSIFerryServerGUC(t *testing.T) {
	needGSITools(t)
	u := newGSIUser(t, "ca1", "alice")
	srv := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	local := t.TempDir()
	src := filepath.Join(local, "src.bin")
	writeRandomFile(t, src, 3<<20+12345)
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"stream", nil},
		{"p4", []string{"-p", "4"}},
		{"dcpriv", []string{"-dcpriv"}},
		{"p4-dcpriv", []string{"-fast", "-p", "4", "-dcpriv"}},
	} {
		put := c.name + ".bin"
		gucGSI(t, u.Proxy, u.CA.Dir, withFlags(c.flags, fileURL(src), gsiURL(srv, put))...)
		same(t, c.name+" put", src, srv.Path(put))
		got := filepath.Join(local, c.name+".got")
		gucGSI(t, u.Proxy, u.CA.Dir, withFlags(c.flags, gsiURL(srv, put), fileURL(got))...)
		same(t, c.name+" get", src, got)
	}

	bobCert, bobKey := u.CA.issue(t, "bob", false)
	bob := gridProxyInit(t, bobCert, bobKey)
	_, err := gucGSIErr(bob, u.CA.Dir, gsiURL(srv, "stream.bin"), fileURL(filepath.Join(local, "bob.got")))
	wantGSIError(t, "unmapped DN", err, "No local mapping for Globus ID")

	other := newGSIUser(t, "other", "alice")
	_, err = gucGSIErr(other.Proxy, mergeCADirs(t, u.CA, other.CA), gsiURL(srv, "stream.bin"), fileURL(filepath.Join(local, "other.got")))
	wantGSIError(t, "untrusted CA", err, "535")
}

// TestGSIThirdPartyGCT: globus-url-copy drives third-party transfers
// between ferry's GSI server and GCT's, both ways, with the data channel
// between them authenticated (DCAU A, each server presenting what the
// client delegated to it), in the clear and with PROT P.
func TestGSIThirdPartyGCT(t *testing.T) {
	needGSITools(t)
	u := newGSIUser(t, "ca1", "alice")
	ferry := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 5<<20+777)
	gucGSI(t, u.Proxy, u.CA.Dir, fileURL(src), gsiURL(ferry, "a.bin"))
	for _, flags := range [][]string{nil, {"-p", "4"}, {"-dcpriv"}} {
		name := strings.Join(flags, " ")
		os.Remove(gct.Path("b.bin"))
		gucGSI(t, u.Proxy, u.CA.Dir, withFlags(flags, gsiURL(ferry, "a.bin"), gct.URL("b.bin"))...)
		same(t, "ferry to GCT "+name, src, gct.Path("b.bin"))
		os.Remove(ferry.Path("c.bin"))
		gucGSI(t, u.Proxy, u.CA.Dir, withFlags(flags, gct.URL("b.bin"), gsiURL(ferry, "c.bin"))...)
		same(t, "GCT to ferry "+name, src, ferry.Path("c.bin"))
	}
}

// TestGSIFerryCopy: ferry copy with the user's proxy (X509_USER_PROXY)
// puts into and gets from GCT's GSI server (the data channel
// authenticated, and encrypted with --encrypt), and copies third-party
// between GCT's and ferry's GSI servers with the data channel
// authenticated by the delegated credentials (and encrypted, --encrypt).
func TestGSIFerryCopy(t *testing.T) {
	needGSITools(t)
	u := newGSIUser(t, "ca1", "alice")
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	ferry := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	env := gsiEnv("X509_USER_PROXY="+u.Proxy, "X509_CERT_DIR="+u.CA.Dir)
	copyGSI := func(args ...string) cliRun {
		t.Helper()
		r := runFerryCLI(t, 90*time.Second, env, "", append([]string{"copy"}, args...)...)
		if r.code != 0 {
			t.Fatalf("ferry copy:\n%s", r)
		}
		return r
	}
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 4<<20+99)
	authenticated := func(what string, r cliRun) {
		t.Helper()
		if !strings.Contains(r.stdout+r.stderr, "data channels authenticated") {
			t.Errorf("%s: the data channel is not authenticated:\n%s", what, r)
		}
	}
	// ferry copy's own server for the local side presents the user's
	// proxy on its data channel, as globus-url-copy does.
	authenticated("put", copyGSI(src, gct.URL("put.bin")))
	same(t, "put to GCT", src, gct.Path("put.bin"))
	back := filepath.Join(t.TempDir(), "back.bin")
	authenticated("get", copyGSI(gct.URL("put.bin"), back))
	same(t, "get from GCT", src, back)
	authenticated("put to ferry", copyGSI("--encrypt", src, gsiURL(ferry, "put-enc.bin")))
	same(t, "encrypted put to ferry", src, ferry.Path("put-enc.bin"))
	copyGSI("--encrypt", src, gct.URL("put-enc.bin"))
	same(t, "encrypted put to GCT", src, gct.Path("put-enc.bin"))
	back = filepath.Join(t.TempDir(), "back-enc.bin")
	copyGSI("--encrypt", gct.URL("put-enc.bin"), back)
	same(t, "encrypted get from GCT", src, back)
	r := copyGSI(gct.URL("put.bin"), gsiURL(ferry, "tp.bin"))
	same(t, "GCT to ferry", src, ferry.Path("tp.bin"))
	authenticated("third party", r)
	copyGSI("--encrypt", gsiURL(ferry, "tp.bin"), gct.URL("enc.bin"))
	same(t, "ferry to GCT encrypted", src, gct.Path("enc.bin"))

	// Without a proxy, a clear error before anything moves.
	r = runFerryCLI(t, 30*time.Second, gsiEnv("X509_USER_PROXY="+filepath.Join(t.TempDir(), "none"), "X509_CERT_DIR="+u.CA.Dir), "",
		"copy", src, gct.URL("none.bin"))
	if r.code == 0 || !strings.Contains(r.stderr, "no grid proxy") {
		t.Fatalf("a copy without a proxy:\n%s", r)
	}
}

// TestGSIDCSCTwoCAs: GCT's server trusts only CA1, ferry's only CA2; the
// client holds a proxy of each (globus-url-copy -src-cred, -dst-cred).
// With -data-cred auto the client hands both servers one credential of
// its own making (DCSC p, then DCAU A): from GCT to ferry the transfer is
// authenticated, also with PROT P. From ferry to GCT it cannot be: ferry
// connects, and GCT (OpenSSL) will not present the MD5-signed certificate
// globus-url-copy makes to a TLS peer that does not offer MD5 signatures,
// which Go's TLS never does ("no suitable signature algorithm"); that
// direction runs with -nodcau. By default (DCAU S, each server naming the
// other's identity) it fails: neither trusts the other's CA.
func TestGSIDCSCTwoCAs(t *testing.T) {
	needGSITools(t)
	u1 := newGSIUser(t, "ca1", "alice")
	u2 := newGSIUser(t, "ca2", "alice")
	both := mergeCADirs(t, u1.CA, u2.CA)
	gct := startGCTGSI(t, u1.CA.Dir, u1.HostCert, u1.HostKey, map[string]string{u1.DN: ""})
	ferry := startFerryGSI(t, u2, map[string]string{u2.DN: "alice"})
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 2<<20+5)
	gucGSI(t, u1.Proxy, both, fileURL(src), gct.URL("src.bin"))
	toFerry := []string{"-src-cred", u1.Proxy, "-dst-cred", u2.Proxy}
	for _, flags := range [][]string{{"-data-cred", "auto"}, {"-data-cred", "auto", "-p", "2", "-dcpriv"}, {"-nodcau"}} {
		name := strings.Join(flags, " ")
		os.Remove(ferry.Path("f.bin"))
		gucGSI(t, u1.Proxy, both, withFlags(append(toFerry, flags...), gct.URL("src.bin"), gsiURL(ferry, "f.bin"))...)
		same(t, "GCT to ferry "+name, src, ferry.Path("f.bin"))
	}
	gucGSI(t, u1.Proxy, both, "-src-cred", u2.Proxy, "-dst-cred", u1.Proxy, "-nodcau", gsiURL(ferry, "f.bin"), gct.URL("g.bin"))
	same(t, "ferry to GCT -nodcau", src, gct.Path("g.bin"))
	_, err := gucGSIErr(u1.Proxy, both, append(toFerry, gct.URL("src.bin"), gsiURL(ferry, "x.bin"))...)
	if err == nil {
		t.Fatal("DCAU S between servers that do not trust each other's CA worked")
	}
}

// TestGSIFerryCopyTwoCAs: the user holds a proxy of CA1 for GCT's server
// (which trusts only CA1) and one of CA2 for ferry's (only CA2): ferry
// copy --src-cred/--dst-cred logs in to each with its own, and since the
// two identities cannot check each other, hands both servers a data
// credential of its own making (DCSC P): the copy is authenticated both
// ways, where globus-url-copy -data-cred auto can only go one.
func TestGSIFerryCopyTwoCAs(t *testing.T) {
	needGSITools(t)
	u1 := newGSIUser(t, "ca1", "alice")
	u2 := newGSIUser(t, "ca2", "alice")
	both := mergeCADirs(t, u1.CA, u2.CA)
	gct := startGCTGSI(t, u1.CA.Dir, u1.HostCert, u1.HostKey, map[string]string{u1.DN: ""})
	ferry := startFerryGSI(t, u2, map[string]string{u2.DN: "alice"})
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 3<<20+7)
	gucGSI(t, u1.Proxy, both, fileURL(src), gct.URL("src.bin"))
	env := gsiEnv("X509_CERT_DIR=" + both)
	for _, c := range []struct {
		name           string
		args           []string
		from, to, path string
	}{
		{"GCT to ferry", []string{"--src-cred", u1.Proxy, "--dst-cred", u2.Proxy}, gct.URL("src.bin"), gsiURL(ferry, "f.bin"), ferry.Path("f.bin")},
		{"ferry to GCT", []string{"--src-cred", u2.Proxy, "--dst-cred", u1.Proxy}, gsiURL(ferry, "f.bin"), gct.URL("g.bin"), gct.Path("g.bin")},
		{"ferry to GCT encrypted", []string{"--encrypt", "--src-cred", u2.Proxy, "--dst-cred", u1.Proxy}, gsiURL(ferry, "f.bin"), gct.URL("h.bin"), gct.Path("h.bin")},
	} {
		r := runFerryCLI(t, 90*time.Second, env, "", append(append([]string{"copy"}, c.args...), c.from, c.to)...)
		if r.code != 0 {
			t.Fatalf("%s:\n%s", c.name, r)
		}
		same(t, c.name, src, c.path)
		if !strings.Contains(r.stderr, "data channels authenticated") {
			t.Errorf("%s: not authenticated:\n%s", c.name, r)
		}
	}
}
