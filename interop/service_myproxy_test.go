//go:build interop

package interop

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// myproxyTurn runs fn, which makes one request to the myproxy-server of
// startMyProxy at addr through someone else (here: ferry server), in the
// server's turn: on a fresh -d process, waiting for it to end after the
// request, as the bed's client helpers do.
func myproxyTurn(t *testing.T, addr string, fn func()) {
	t.Helper()
	s, _ := myproxyAt(t, addr)
	s.turn.Lock()
	defer s.turn.Unlock()
	if err := s.ready(15 * time.Second); err != nil {
		t.Fatalf("myproxy-server on %s: %v\n%s", s.addr, err, s.log)
	}
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	fn()
	p.wait(5 * time.Second)
}

// TestServiceMyProxy: a ferry server (--gsi-ca-dir) with two gsi
// endpoints, GCT's GSI server and ferry's, that name one real
// myproxy-server holding alice's credential (myproxy-init). A wrong pass
// phrase gives a clear error and activates nothing. `ferry endpoint
// activate gct --myproxy-user alice-mp` with the pass phrase on standard
// input activates both with the one proxy fetched (its identity alice's,
// expiring with it), and a transfer between them, waiting INACTIVE until
// then, SUCCEEDS byte-identical. The pass phrase is in neither the
// service's log nor its data directory.
func TestServiceMyProxy(t *testing.T) {
	needGSITools(t, "myproxy-server", "myproxy-init")
	u := newGSIUser(t, "ca1", "alice")
	mp := startMyProxy(t, u.CA.Dir, u.HostCert, u.HostKey)
	const pass = "ferry MyProxy pass phrase 31"
	myproxyInit(t, mp, u.CA.Dir, u.Cert, u.Key, "alice-mp", pass)
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	fgsi := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	s := startService(t, serviceConfig{Args: []string{"--gsi-ca-dir", u.CA.Dir}})
	c := newServiceUser(t, s, "")
	c.ok("", "endpoint", "add", "gct", "--server", "gsiftp://"+gct.addr, "--myproxy", mp)
	c.ok("", "endpoint", "add", "fgsi", "--server", "gsiftp://"+fgsi.addr)
	c.ok("", "endpoint", "update", "fgsi", "--myproxy", mp)
	var ep api.Endpoint
	c.decode(&ep, "endpoint", "show", "fgsi")
	if ep.AuthMethod != domain.AuthGSI || ep.MyProxyServer != mp || ep.Activated {
		t.Fatalf("endpoint fgsi: %+v; want gsi, MyProxy server %s, not activated", ep, mp)
	}

	src := gct.Path("src.bin")
	writeRandomFile(t, src, 5<<20+777)
	id := c.transfer("gct:"+epPath(gct, "src.bin"), "fgsi:/dst.bin", "--verify-checksum")
	c.waitFor(id, "INACTIVE (NOT_ACTIVATED)", 30*time.Second, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceNotActivated
	})

	// A wrong pass phrase: refused by the MyProxy server, nothing
	// activated.
	var r cliRun
	myproxyTurn(t, mp, func() { r = c.run("not "+pass+"\n", "endpoint", "activate", "gct", "--myproxy-user", "alice-mp") })
	if r.code == 0 || !strings.Contains(r.stderr, "MyProxy server "+mp+` refused the pass phrase of "alice-mp"`) ||
		!strings.Contains(r.stderr, "no endpoint is activated") {
		t.Fatalf("a wrong pass phrase:\n%s", r)
	}
	t.Logf("wrong pass phrase: %s", strings.TrimSpace(r.stderr))
	for _, name := range []string{"gct", "fgsi"} {
		c.decode(&ep, "endpoint", "show", name)
		if ep.Activated {
			t.Fatalf("%s is activated after a wrong pass phrase", name)
		}
	}

	// The right one: both endpoints, one proxy.
	myproxyTurn(t, mp, func() {
		r = c.run(pass+"\n", "endpoint", "activate", "gct", "--myproxy-user", "alice-mp", "-F", "json")
	})
	if r.code != 0 {
		t.Fatalf("activate through MyProxy:\n%s", r)
	}
	var res api.ActivationResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	t.Logf("activation: %s", res.Message)
	if res.Code != "Activated" || res.Subject != u.DN || len(res.Endpoints) != 2 ||
		res.Endpoints[0].DisplayName != "alice#gct" || res.Endpoints[1].DisplayName != "alice#fgsi" || res.Resumed != 1 {
		t.Fatalf("activation result %+v; want gct then fgsi, as %s, the task resumed", res, u.DN)
	}
	// myproxy-logon's default lifetime (12 h) at most, as the server's
	// policy allows.
	if res.ExpiresIn <= 60 || res.ExpiresIn > 12*3600 || res.Endpoints[1].ExpiresIn != res.ExpiresIn {
		t.Errorf("expires in %d s (fgsi: %d); want the fetched proxy's lifetime, up to 12 h, for both", res.ExpiresIn, res.Endpoints[1].ExpiresIn)
	}
	for _, name := range []string{"gct", "fgsi"} {
		c.decode(&ep, "endpoint", "show", name)
		if !ep.Activated {
			t.Fatalf("%s is not activated: %+v", name, ep)
		}
	}
	c.succeeded(id, time.Minute)
	same(t, "GCT to ferry with a MyProxy proxy", src, fgsi.Path("dst.bin"))
	id = c.transfer("fgsi:/dst.bin", "gct:"+epPath(gct, "back.bin"))
	c.succeeded(id, time.Minute)
	same(t, "ferry to GCT with a MyProxy proxy", src, gct.Path("back.bin"))

	// The pass phrase is nowhere in the service's log or data.
	if strings.Contains(string(s.log.Bytes()), pass) || strings.Contains(string(s.log.Bytes()), "MyProxy pass phrase 31") {
		t.Errorf("the service's log holds the pass phrase")
	}
	err := filepath.WalkDir(s.cfg.Data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "pass phrase 31") {
			t.Errorf("%s holds the pass phrase", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
