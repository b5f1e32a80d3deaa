package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gsi"
	"ferry/gsi/myproxy"
	"ferry/internal/netpolicy"
	"ferry/service/api"
	"ferry/service/domain"
)

// fakeMyProxy stands for MyProxy servers: it gives the proxy of its
// credential to whoever has the pass phrase of user.
type fakeMyProxy struct {
	mu         sync.Mutex
	user, pass string
	proxy      string // PEM
	calls      []myproxyCall
}

type myproxyCall struct {
	addr string
	o    myproxy.Options
}

func (f *fakeMyProxy) logon(ctx context.Context, addr string, o myproxy.Options) (*gsi.Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, myproxyCall{addr, o})
	switch {
	case o.Trust == nil:
		return nil, errors.New("MyProxy: no trusted CAs")
	case o.Username != f.user:
		return nil, fmt.Errorf("MyProxy: %w for user %s", myproxy.ErrNoCredentials, o.Username)
	case o.Passphrase != f.pass:
		return nil, fmt.Errorf("MyProxy: %w for %s", myproxy.ErrBadPassphrase, o.Username)
	}
	return gsi.ParseCredential([]byte(f.proxy))
}

func (f *fakeMyProxy) last() myproxyCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return myproxyCall{}
	}
	return f.calls[len(f.calls)-1]
}

// TestMyProxyEndpointSpec: the document's MyProxy fields reach the
// core's rules (service/core's TestMyProxyEndpointSpec) and come back
// as the core keeps them; a refused one is answered 400.
func TestMyProxyEndpointSpec(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	_, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("bad"), Servers: []api.Server{{URI: "gsiftp://127.0.0.1:2811"}},
		MyProxyServer: new("h:x")})
	if ae := wantAPIError(t, err, 400, "BadRequest"); !strings.Contains(ae.Message, "bad port") {
		t.Errorf("message %q", ae.Message)
	}
	if _, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("grid"), Servers: []api.Server{{URI: "gsiftp://127.0.0.1:2811"}}}); err != nil {
		t.Fatal(err)
	}
	// The raw document's field names.
	a := e.raw("PUT", "endpoint/grid", tok, strings.NewReader(`{"myproxy_server":"MP.example","myproxy_server_dn":"/CN=mp"}`))
	if a.status != 200 || !strings.Contains(string(a.body), `"myproxy_server":"mp.example:7512"`) || !strings.Contains(string(a.body), `"myproxy_server_dn":"/CN=mp"`) {
		t.Fatalf("PUT myproxy_server: %d %s", a.status, a.body)
	}
}

// TestMyProxyActivation: a gsi endpoint naming a MyProxy server is
// activated with a MyProxy username and pass phrase: the service fetches
// a proxy with its grid CAs and the server's DN, checks it with a login,
// stores it sealed, expiring with it — for that endpoint and every other
// gsi endpoint the caller may use that names the same server, whose
// INACTIVE tasks resume too; the answer lists them. A wrong pass phrase
// activates nothing. The pass phrase is in neither the store nor the
// logs nor any answer.
func TestMyProxyActivation(t *testing.T) {
	const pass = "correct horse battery staple 42"
	proxy, dn, notAfter := gridProxy(t, "Alice", 3*time.Hour)
	mp := &fakeMyProxy{user: "alice-mp", pass: pass, proxy: proxy}
	e := newEnv(t, func(s *setup) {
		s.Trust = gsi.NewTrust(nil, nil)
		s.MyProxyLogon = mp.logon
	})
	e.ops.set(func(f *fakeOps) { f.gridmap[dn] = true })
	alice, _ := e.user("alice")
	bob, _ := e.user("bob")
	gsiEP := func(c interface {
		CreateEndpoint(context.Context, api.EndpointSpec) (api.Endpoint, error)
	}, name, server string, public bool) api.Endpoint {
		t.Helper()
		spec := api.EndpointSpec{Name: new(name), Servers: []api.Server{{URI: "gsiftp://127.0.0.1:2811"}}, Public: new(public)}
		if server != "" {
			spec.MyProxyServer = new(server)
		}
		ep, err := c.CreateEndpoint(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	g1 := gsiEP(alice, "g1", "MP.example", false)
	g2 := gsiEP(alice, "g2", "mp.example:7512", false)
	g3 := gsiEP(alice, "g3", "mp.example:7000", false)
	g4 := gsiEP(alice, "g4", "", false)
	gb := gsiEP(bob, "gb", "mp.example", true)
	gp := gsiEP(bob, "gp", "mp.example", false)
	if _, err := alice.UpdateEndpoint(t.Context(), "g1", api.EndpointSpec{MyProxyServerDN: new("/O=Grid/CN=host/mp.example")}); err != nil {
		t.Fatal(err)
	}
	addEndpoint(t, alice, "pub", "anonymous", true)
	addEndpoint(t, alice, "pw", "password", false)

	req, err := alice.ActivationRequirements(t.Context(), "g1")
	names := func(rs []api.ActivationRequirement) (out []string) {
		for _, r := range rs {
			out = append(out, r.Type+":"+r.Name)
		}
		return out
	}
	if err != nil || !slices.Equal(names(req.Data), []string{"proxy:proxy", "proxy:username", "myproxy:myproxy_username", "myproxy:myproxy_passphrase"}) ||
		req.Data[0].Required || !req.Data[3].Private {
		t.Fatalf("requirements of a gsi endpoint with a MyProxy server: %+v, %v", req, err)
	}
	if req, err := alice.ActivationRequirements(t.Context(), "g4"); err != nil || len(req.Data) != 2 || !req.Data[0].Required {
		t.Fatalf("requirements of a gsi endpoint without one: %+v, %v", req, err)
	}

	// Tasks waiting for g1 and for g2.
	u, err := e.db.UserByName(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, src := range []string{"g1", "g2"} {
		task, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: src, DestinationEndpoint: "pub",
			Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task.TaskID)
	}
	for _, ep := range []api.Endpoint{g1, g2} {
		if _, err := e.db.Deactivate(t.Context(), u.ID, ep.ID, domain.NiceCredentialExpired, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range tasks {
		if got, err := alice.Task(t.Context(), id); err != nil || got.Status != domain.StatusInactive {
			t.Fatalf("task %s before the activation: %+v, %v", id, got, err)
		}
	}

	var msgs []string
	for _, tc := range []struct {
		name   string
		ep     string
		a      api.Activate
		status int
		msg    string
	}{
		{"wrong pass phrase", "g1", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: "wrong " + pass}, 400,
			`MyProxy server mp.example:7512 refused the pass phrase of "alice-mp": no endpoint is activated`},
		{"unknown user", "g1", api.Activate{MyProxyUsername: "carol", MyProxyPassphrase: pass}, 400, `holds no credential of "carol"`},
		{"no pass phrase", "g1", api.Activate{MyProxyUsername: "alice-mp"}, 400, "both required"},
		{"no username", "g1", api.Activate{MyProxyPassphrase: pass}, 400, "both required"},
		{"and a proxy", "g1", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass, Proxy: proxy}, 400, "not both"},
		{"no MyProxy server", "g4", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass}, 400, "names no MyProxy server"},
		{"a password endpoint", "pw", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass}, 400, "activates gsi endpoints only"},
		{"a newline", "g1", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: "a\nb"}, 400, "newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alice.Activate(t.Context(), tc.ep, tc.a)
			ae := wantAPIError(t, err, tc.status, "BadRequest")
			if !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("message %q, want %q in it", ae.Message, tc.msg)
			}
			msgs = append(msgs, ae.Message)
		})
	}
	for _, ep := range []string{"g1", "g2", "g3", "g4", "bob#gb"} {
		if got, err := alice.Endpoint(t.Context(), ep); err != nil || got.Activated {
			t.Fatalf("%s after failed MyProxy activations: %+v, %v", ep, got, err)
		}
	}
	if c := mp.calls[0]; len(mp.calls) != 2 || c.addr != "mp.example:7512" || c.o.Username != "alice-mp" || c.o.Trust == nil ||
		c.o.ServerDN != "/O=Grid/CN=host/mp.example" || c.o.Lifetime != 0 {
		t.Fatalf("MyProxy logon: %s %+v; want mp.example:7512, alice-mp, the service's CAs, g1's server DN, the default lifetime (and 2 calls: %d)", c.addr, c.o, len(mp.calls))
	}

	// The right pass phrase: g1, g2 (alice's) and bob#gb (public), not
	// g3 (another port), g4 (none) nor bob#gp (private).
	res, err := alice.Activate(t.Context(), "g1", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass})
	if err != nil {
		t.Fatal(err)
	}
	left := int64(notAfter.Sub(e.clock.Now()) / time.Second)
	var got []string
	for _, a := range res.Endpoints {
		got = append(got, fmt.Sprintf("%s %s %d", a.DisplayName, a.ID, a.Resumed))
		if a.ExpiresIn < left-2 || a.ExpiresIn > left {
			t.Errorf("%s expires in %d s, want about %d (the proxy's)", a.DisplayName, a.ExpiresIn, left)
		}
	}
	want := []string{"alice#g1 " + g1.ID + " 1", "alice#g2 " + g2.ID + " 1", "bob#gb " + gb.ID + " 0"}
	if res.Code != "Activated" || res.Subject != dn || res.Resumed != 2 || !slices.Equal(got, want) ||
		!strings.Contains(res.Message, "MyProxy server mp.example:7512") || !strings.Contains(res.Message, "so are alice#g2, bob#gb") {
		t.Fatalf("activation through MyProxy: %+v\nendpoints %q, want %q", res, got, want)
	}
	if e.ops.lastCall() != "check as "+dn {
		t.Errorf("the fetched proxy was not checked with a login: %q", e.ops.lastCall())
	}
	for _, id := range tasks {
		if got, err := alice.Task(t.Context(), id); err != nil || got.Status != domain.StatusActive {
			t.Fatalf("task %s after the activation: %+v, %v", id, got, err)
		}
	}
	for _, ep := range []api.Endpoint{g1, g2, gb} {
		a, err := e.db.Activation(t.Context(), u.ID, ep.ID)
		if err != nil || !a.Expires.Equal(notAfter) || a.Subject != dn || strings.Contains(string(a.Sealed), "PRIVATE KEY") {
			t.Fatalf("stored activation of %s: expires %v subject %q, %v; want %v, %q, sealed", ep.Name, a.Expires, a.Subject, err, notAfter, dn)
		}
	}
	for _, ep := range []api.Endpoint{g3, g4, gp} {
		if _, err := e.db.Activation(t.Context(), u.ID, ep.ID); !domain.IsNotFound(err) {
			t.Errorf("%s: activated (%v); it does not share the MyProxy server", ep.Name, err)
		}
	}
	if got, err := bob.Endpoint(t.Context(), "gb"); err != nil || got.Activated {
		t.Fatalf("bob's own activation of gb: %+v, %v; want none (alice's is hers)", got, err)
	}
	// The shared proxy works on g2.
	e.ops.set(func(f *fakeOps) { f.dirs["/"] = nil })
	if _, err := alice.Ls(t.Context(), "g2", api.ListQuery{}); err != nil || e.ops.lastCall() != "list / as "+dn {
		t.Fatalf("ls g2 with the shared proxy: %v, %q", err, e.ops.lastCall())
	}

	// A requested lifetime goes to the server, and bounds the activations.
	res, err = alice.Activate(t.Context(), "g2", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass, Lifetime: 600})
	if err != nil || res.ExpiresIn != 600 || len(res.Endpoints) != 3 || res.Endpoints[0].DisplayName != "alice#g2" ||
		res.Endpoints[1].DisplayName != "alice#g1" || res.Endpoints[2].ExpiresIn != 600 {
		t.Fatalf("activate g2 for 600 s: %+v, %v", res, err)
	}
	if c := mp.last(); c.o.Lifetime != 600*time.Second || c.o.ServerDN != "" {
		t.Fatalf("MyProxy logon for 600 s: %+v", c.o)
	}

	// Servers that do not map the fetched proxy: refused.
	e.ops.set(func(f *fakeOps) { f.gridmap[dn] = false })
	if _, err := e.db.Deactivate(t.Context(), u.ID, g1.ID, domain.NiceNotActivated, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Activate(t.Context(), "g1", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass})
	if ae := wantAPIError(t, err, 400, "BadRequest"); !strings.Contains(ae.Message, "refused the login of the grid proxy of \""+dn+"\" from MyProxy server") {
		t.Errorf("unmapped: %q", ae.Message)
	} else {
		msgs = append(msgs, ae.Message)
	}

	// Without grid CAs the service cannot check a MyProxy server.
	e2 := newEnv(t, func(s *setup) { s.MyProxyLogon = mp.logon })
	carol, _ := e2.user("carol")
	gsiEP(carol, "g", "mp.example", false)
	_, err = carol.Activate(t.Context(), "g", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: pass})
	if ae := wantAPIError(t, err, 502, "Unavailable"); !strings.Contains(ae.Message, "--gsi-ca-dir") {
		t.Errorf("no CAs: %q", ae.Message)
	}

	// The pass phrase is nowhere: not in an answer, a log, or the store.
	for _, m := range msgs {
		if strings.Contains(m, pass) {
			t.Errorf("an error message holds the pass phrase: %q", m)
		}
	}
	if strings.Contains(e.logs.String(), pass) || strings.Contains(e.logs.String(), "horse battery") {
		t.Errorf("the logs hold the pass phrase:\n%s", e.logs.String())
	}
	files, err := os.ReadDir(e.dbDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(e.dbDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "horse battery") {
			t.Errorf("the store's %s holds the pass phrase", f.Name())
		}
	}
}

// TestMyProxyDialPolicy: the service connects to a MyProxy server under
// its network policy as it connects, not only when the endpoint was
// saved: a name that resolves to an allowed address then and to loopback
// at activation (DNS rebinding) is refused.
func TestMyProxyDialPolicy(t *testing.T) {
	nets, err := netpolicy.New("", false)
	if err != nil {
		t.Fatal(err)
	}
	proxy, dn, _ := gridProxy(t, "Alice", 3*time.Hour)
	mp := &fakeMyProxy{user: "alice-mp", pass: "pp", proxy: proxy}
	e := newEnv(t, func(s *setup) {
		s.Networks, s.Trust, s.MyProxyLogon = nets, gsi.NewTrust(nil, nil), mp.logon
	})
	e.ops.set(func(f *fakeOps) { f.gridmap[dn] = true })
	alice, _ := e.user("alice")
	if _, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("grid"), Servers: []api.Server{{URI: "gsiftp://192.0.2.1:2811"}},
		MyProxyServer: new("192.0.2.10:7512")}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Activate(t.Context(), "grid", api.Activate{MyProxyUsername: "alice-mp", MyProxyPassphrase: "pp"}); err != nil {
		t.Fatal(err)
	}
	c := mp.last()
	if c.o.Dial == nil {
		t.Fatal("MyProxy is dialed without the network policy")
	}
	if conn, err := c.o.Dial(t.Context(), "tcp", "127.0.0.1:7512"); !errors.As(err, new(*netpolicy.DeniedError)) {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("a dial to loopback: %v, want refused by the policy", err)
	}
}
