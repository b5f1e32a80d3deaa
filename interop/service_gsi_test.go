//go:build interop

package interop

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gsi"
	"ferry/service/api"
	"ferry/service/domain"
)

// TestServiceGSI: a ferry server (--gsi-ca-dir) with two gsi endpoints,
// GCT's GSI server and ferry's, activated with a grid-proxy-init proxy
// (ferry endpoint activate --proxy): a third-party transfer between them,
// submitted before the activation, SUCCEEDS once they are activated, byte-identical, over data channels authenticated with the
// delegated proxies. Then a task started with a proxy that expires before
// it can finish goes INACTIVE (CREDENTIAL_EXPIRED) when the proxy does;
// activating again with a fresh proxy resumes it, and it SUCCEEDS.
func TestServiceGSI(t *testing.T) {
	needGSITools(t)
	u := newGSIUser(t, "ca1", "alice")
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	fgsi := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	s := startService(t, serviceConfig{Args: []string{"--gsi-ca-dir", u.CA.Dir}})
	c := newServiceUser(t, s, "")
	c.ok("", "endpoint", "add", "gct", "--server", "gsiftp://"+gct.addr)
	c.ok("", "endpoint", "add", "fgsi", "--server", "gsiftp://"+fgsi.addr)
	var ep api.Endpoint
	c.decode(&ep, "endpoint", "show", "gct")
	if ep.AuthMethod != domain.AuthGSI || ep.Activated {
		t.Fatalf("endpoint gct: auth %q, activated %v; want gsi, not activated", ep.AuthMethod, ep.Activated)
	}

	// Submitted before activation, the task waits INACTIVE; activating
	// both endpoints with the proxy runs it.
	src := gct.Path("src.bin")
	writeRandomFile(t, src, 6<<20+4321)
	id := c.transfer("gct:"+epPath(gct, "src.bin"), "fgsi:/dst.bin", "--verify-checksum")
	c.waitFor(id, "INACTIVE (NOT_ACTIVATED)", 30*time.Second, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceNotActivated
	})
	for _, name := range []string{"gct", "fgsi"} {
		out := c.ok("", "endpoint", "activate", name, "--proxy", u.Proxy)
		if !strings.Contains(out, u.DN) {
			t.Errorf("activate %s: %q; want it to name %s", name, out, u.DN)
		}
	}
	task := c.succeeded(id, time.Minute)
	same(t, "GCT to ferry through the service", src, fgsi.Path("dst.bin"))
	ev := c.events(id)
	t.Logf("GCT -> ferry: %d bytes; events:\n%s", task.BytesTransferred, ev)
	if !strings.Contains(ev, "data channels authenticated") {
		t.Errorf("the data channels between the gsi endpoints are not authenticated:\n%s", ev)
	}
	id = c.transfer("fgsi:/dst.bin", "gct:"+epPath(gct, "back.bin"), "--encrypt-data")
	c.succeeded(id, time.Minute)
	same(t, "ferry to GCT, encrypted", src, gct.Path("back.bin"))
	if ev := c.events(id); !strings.Contains(ev, "data channels authenticated and encrypted") {
		t.Errorf("--encrypt-data between gsi endpoints: not encrypted:\n%s", ev)
	}

	// A proxy that expires in 20 s, made in Go from alice's certificate.
	issuer, err := gsi.ReadCertKey(u.Cert, u.Key)
	if err != nil {
		t.Fatal(err)
	}
	shortCred, err := gsi.NewProxyCredential(issuer, gsi.ProxyOptions{Lifetime: 20 * time.Second, PathLen: gsi.NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short-proxy.pem")
	if err := shortCred.WriteProxyFile(short); err != nil {
		t.Fatal(err)
	}
	files := makeServiceTree(t, gct.Path("tree"), 60, 0)
	th := startThrottle(t, fgsi, time.Millisecond, 30*time.Millisecond)
	out := c.ok("", "endpoint", "activate", "fgsi", "--proxy", short)
	t.Logf("short proxy: %s", strings.TrimSpace(out))
	id = c.transfer("gct:"+epPath(gct, "tree"), "fgsi:/tree", "-r")
	c.waitFor(id, "files recorded done", 20*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
	th.freeze()
	task = c.waitFor(id, "INACTIVE (CREDENTIAL_EXPIRED)", 40*time.Second, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceCredentialExpired
	})
	if !time.Now().After(shortCred.NotAfter()) {
		t.Errorf("the task went INACTIVE at %v, before the proxy expired at %v", time.Now(), shortCred.NotAfter())
	}
	if task.FilesTransferred >= int64(files) {
		t.Fatalf("the proxy expired with all %d files transferred: want it midway", files)
	}
	t.Logf("proxy expired with %d of %d files transferred", task.FilesTransferred, files)
	if ev := c.events(id); !strings.Contains(ev, "expired") {
		t.Errorf("no event says the credential expired:\n%s", ev)
	}
	th.release()
	out = c.ok("", "endpoint", "activate", "fgsi", "--proxy", u.Proxy)
	if !strings.Contains(out, "1 waiting task resumed") {
		t.Errorf("activate with a fresh proxy: %q; want it to say the task resumed", out)
	}
	c.succeeded(id, time.Minute)
	if err := compareTrees(gct.Path("tree"), fgsi.Path("tree")); err != nil {
		t.Fatal(err)
	}
}
