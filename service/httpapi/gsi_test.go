package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"ferry/gsi"
	"ferry/service/api"
	"ferry/service/domain"
)

// gridProxy makes a CA, a user certificate of it with CN=cn, and a proxy
// of that certificate valid for life: the proxy's PEM, its identity and
// its NotAfter.
func gridProxy(t *testing.T, cn string, life time.Duration) (string, string, time.Time) {
	t.Helper()
	mk := func(tmpl, parent *x509.Certificate, pub, signer any) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	userKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"Grid"}, CommonName: "Test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	ca := mk(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	user := mk(&x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{Organization: []string{"Grid"}, CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature},
		ca, &userKey.PublicKey, caKey)
	proxy, err := gsi.NewProxyCredential(&gsi.Credential{Chain: []*x509.Certificate{user}, Key: userKey},
		gsi.ProxyOptions{Lifetime: life, PathLen: gsi.NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	return string(proxy.Encode()), proxy.Identity(), proxy.NotAfter()
}

// TestGSIActivation: a gsi endpoint (gsiftp:// servers) is activated with
// a grid proxy, which the service checks (parses, not expired, mapped by
// the servers), keeps sealed, and whose NotAfter is the activation's
// expiry (or a shorter lifetime); the proxy shows nowhere but sealed.
func TestGSIActivation(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	ep, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("grid"),
		Servers: []api.Server{{URI: "gsiftp://127.0.0.1"}, {URI: "gsiftp://dtn.example:2812"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ep.AuthMethod != domain.AuthGSI || ep.Servers[0].URI != "gsiftp://127.0.0.1:2811" || ep.Servers[0].Scheme != "gsiftp" ||
		ep.Servers[1].Port != 2812 || ep.Activated {
		t.Fatalf("gsi endpoint: %+v", ep)
	}
	addEndpoint(t, alice, "pub", "anonymous", true)
	req, err := alice.ActivationRequirements(t.Context(), "grid")
	if err != nil || req.Activated || len(req.Data) != 2 || req.Data[0].Type != "proxy" || req.Data[0].Name != "proxy" ||
		!req.Data[0].Private || !req.Data[0].Required || req.Data[1].Name != "username" || req.Data[1].Required {
		t.Fatalf("requirements %+v, %v", req, err)
	}

	// A task that waits for the activation.
	task, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "grid", DestinationEndpoint: "pub",
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Claim(t.Context(), "w1", e.clock.Now(), time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.db.SetStatus(t.Context(), task.TaskID, "w1", domain.StatusInactive, domain.NiceCredentialExpired, nil, e.clock.Now(), nil); err != nil {
		t.Fatal(err)
	}

	proxy, dn, notAfter := gridProxy(t, "Alice", 2*time.Hour)
	short, _, _ := gridProxy(t, "Alice", 5*time.Second)
	bobProxy, bobDN, _ := gridProxy(t, "Bob", time.Hour)
	e.ops.set(func(f *fakeOps) { f.gridmap[dn] = true })
	keyPEM := proxy[strings.Index(proxy, "PRIVATE KEY-----\n")+17:][:40] // a piece of the key
	for _, tc := range []struct {
		name string
		a    api.Activate
		msg  string
	}{
		{"no proxy", api.Activate{}, "proxy is required"},
		{"a password", api.Activate{Username: "carol", Password: "secret"}, "not a password"},
		{"not PEM", api.Activate{Proxy: "hello"}, "not a grid proxy"},
		{"no key", api.Activate{Proxy: proxy[:strings.Index(proxy, "-----END CERTIFICATE-----")+26]}, "not a grid proxy"},
		{"about to expire", api.Activate{Proxy: short}, "expires at"},
		{"unmapped", api.Activate{Proxy: bobProxy}, "refused the login of the grid proxy of \"" + bobDN + "\""},
		{"lifetime too long", api.Activate{Proxy: proxy, Lifetime: 365 * 86400}, "lifetime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alice.Activate(t.Context(), "grid", tc.a)
			if ae := wantAPIError(t, err, 400, "BadRequest"); !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("message %q, want %q in it", ae.Message, tc.msg)
			}
		})
	}
	if _, err := alice.Activate(t.Context(), "pub", api.Activate{Proxy: proxy}); err != nil {
		t.Fatalf("an anonymous endpoint needs no activation, with or without a proxy: %v", err)
	}

	res, err := alice.Activate(t.Context(), "alice#grid", api.Activate{Proxy: proxy})
	left := int64(notAfter.Sub(e.clock.Now()) / time.Second)
	if err != nil || res.Code != "Activated" || res.Subject != dn || res.ExpiresIn < left-2 || res.ExpiresIn > left || res.Resumed != 1 ||
		!strings.Contains(res.Message, dn) {
		t.Fatalf("activate: %+v, %v; want it to expire with the proxy, in about %d s", res, err, left)
	}
	if e.ops.lastCall() != "check as "+dn {
		t.Errorf("the proxy was not checked with a login: last call %q", e.ops.lastCall())
	}
	if got, err := alice.Task(t.Context(), task.TaskID); err != nil || got.Status != domain.StatusActive {
		t.Fatalf("task after activation: %+v, %v", got, err)
	}
	u, err := e.db.UserByName(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.db.Activation(t.Context(), u.ID, ep.ID)
	if err != nil || !a.Expires.Equal(notAfter) || a.Subject != dn {
		t.Fatalf("stored activation: expires %v subject %q, %v; want %v, %q", a.Expires, a.Subject, err, notAfter, dn)
	}
	if strings.Contains(string(a.Sealed), "PRIVATE KEY") || strings.Contains(string(a.Sealed), "CERTIFICATE") {
		t.Fatal("the proxy is stored unsealed")
	}
	if req, err := alice.ActivationRequirements(t.Context(), "grid"); err != nil || !req.Activated || req.Subject != dn {
		t.Fatalf("requirements once activated: %+v, %v", req, err)
	}
	e.ops.set(func(f *fakeOps) { f.dirs["/"] = nil })
	if _, err := alice.Ls(t.Context(), "grid", api.ListQuery{}); err != nil || e.ops.lastCall() != "list / as "+dn {
		t.Fatalf("ls with the proxy: %v, last call %q", err, e.ops.lastCall())
	}

	// A lifetime shorter than the proxy's is kept.
	if res, err := alice.Activate(t.Context(), "grid", api.Activate{Proxy: proxy, Lifetime: 600}); err != nil || res.ExpiresIn != 600 {
		t.Fatalf("activate for 600 s: %+v, %v", res, err)
	}
	// The proxy expires: so does the activation.
	if _, err := alice.Activate(t.Context(), "grid", api.Activate{Proxy: proxy}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(notAfter.Sub(e.clock.Now()) + time.Second)
	if got, err := alice.Endpoint(t.Context(), "grid"); err != nil || got.Activated || got.ExpiresIn != 0 {
		t.Fatalf("after the proxy expired: %+v, %v", got, err)
	}
	_, err = alice.Ls(t.Context(), "grid", api.ListQuery{})
	wantAPIError(t, err, 409, "NotActivated")
	_, err = alice.Activate(t.Context(), "grid", api.Activate{Proxy: proxy})
	if ae := wantAPIError(t, err, 400, "BadRequest"); !strings.Contains(ae.Message, "expired") {
		t.Errorf("an expired proxy: %q", ae.Message)
	}

	// A password endpoint takes no proxy.
	addEndpoint(t, alice, "pw", "password", false)
	_, err = alice.Activate(t.Context(), "pw", api.Activate{Proxy: proxy})
	if ae := wantAPIError(t, err, 400, "BadRequest"); !strings.Contains(ae.Message, "grid proxy activates gsi endpoints only") {
		t.Errorf("a proxy for a password endpoint: %q", ae.Message)
	}

	// The proxy's key is in no log.
	if logs := e.logs.String(); strings.Contains(logs, "PRIVATE KEY") || strings.Contains(logs, keyPEM) {
		t.Errorf("the logs hold the proxy:\n%s", logs)
	}
}
