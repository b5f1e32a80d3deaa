package httpapi_test

import (
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/connect/tunnel"
	"ferry/service/api"
	"ferry/service/domain"
)

// agents is a relay where the agents of the listed endpoints are online.
type agents map[string]bool

func (a agents) Dial(context.Context, string) (net.Conn, error) { return nil, nil }

func (a agents) Online(_ context.Context, id string) (<-chan struct{}, bool) { return nil, a[id] }

func TestConnectEndpoints(t *testing.T) {
	online := agents{}
	var revoked []string
	e := newEnv(t, func(s *setup) {
		s.Agents, s.RelayURL, s.CAPin = online, "tcp://203.0.113.7:8443", "PIN"
		s.Revoked = func(id string) { revoked = append(revoked, id) }
	})
	alice, _ := e.user("alice")
	bob, _ := e.user("bob")
	ctx := t.Context()

	ep, err := alice.CreateEndpoint(ctx, api.EndpointSpec{Name: new("laptop"), AuthMethod: new("connect")})
	if err != nil {
		t.Fatal(err)
	}
	if ep.AuthMethod != "connect" || len(ep.Servers) != 0 || ep.ExpiresIn != -1 || !ep.Activated || ep.Connected {
		t.Fatalf("connect endpoint %+v: want no servers, no activation needed, not connected", ep)
	}
	// Its first setup key comes with it.
	if k := ep.SetupKey; k == nil || k.EndpointID != ep.ID || !strings.HasSuffix(k.SetupKey, ".PIN") {
		t.Fatalf("new connect endpoint's setup key %+v", k)
	} else if secret, _, _ := domain.SplitSetupKey(k.SetupKey); !usable(t, e, secret, ep.ID) {
		t.Fatal("the new connect endpoint's setup key does not pair")
	}
	if ep, _ := alice.Endpoint(ctx, "laptop"); ep.SetupKey != nil {
		t.Fatal("the setup key is shown again")
	}
	online[ep.ID] = true
	if ep, _ = alice.Endpoint(ctx, "laptop"); !ep.Connected {
		t.Fatal("endpoint not shown connected while its agent is")
	}

	k1, err := alice.SetupKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	secret, pin, err := domain.SplitSetupKey(k1.SetupKey)
	if err != nil || pin != "PIN" || len(secret) < 26 || k1.EndpointID != ep.ID {
		t.Fatalf("setup key %+v: %v", k1, err)
	}
	if d := k1.Expires.Sub(e.clock.Now()); d != domain.SetupKeyLifetime {
		t.Fatalf("setup key lasts %v, want %v", d, domain.SetupKeyLifetime)
	}
	// Only its hash is stored, and a new key replaces it.
	if !usable(t, e, secret, ep.ID) {
		t.Fatal("the setup key does not pair")
	}
	gen, _ := e.db.CertGeneration(ctx, ep.ID)
	if _, err := alice.SetupKey(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.db.CertGeneration(ctx, ep.ID); g != gen+1 {
		t.Fatalf("generation %d after a new key, want %d", g, gen+1)
	}
	if len(revoked) != 2 || revoked[1] != ep.ID {
		t.Fatalf("relay told of revocations %v, want the endpoint twice", revoked)
	}

	plain := addEndpoint(t, alice, "dtn", "anonymous", true)
	for _, c := range []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"servers", func() error {
			_, err := alice.CreateEndpoint(ctx, api.EndpointSpec{Name: new("x"), AuthMethod: new("connect"), Servers: []api.Server{{URI: "ftp://h:1"}}})
			return err
		}, 400, "BadRequest"},
		{"becomes connect", func() error {
			_, err := alice.UpdateEndpoint(ctx, "dtn", api.EndpointSpec{AuthMethod: new("connect")})
			return err
		}, 400, "BadRequest"},
		{"stops being connect", func() error {
			_, err := alice.UpdateEndpoint(ctx, "laptop", api.EndpointSpec{AuthMethod: new("password")})
			return err
		}, 400, "BadRequest"},
		{"key of a plain endpoint", func() error { _, err := alice.SetupKey(ctx, plain.ID); return err }, 400, "BadRequest"},
		{"key of another's", func() error { _, err := bob.SetupKey(ctx, ep.ID); return err }, 404, "NotFound"},
		{"activate", func() error {
			_, err := alice.Activate(ctx, "laptop", api.Activate{Username: "a", Password: "b"})
			return err
		}, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if c.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantAPIError(t, err, c.status, c.code)
		})
	}

	// The relays: this process's first, then the other processes', while
	// their records hold.
	for _, p := range []domain.Process{
		{ID: "b", RelayURL: "http://b.example/api/v0.10/relay", Expires: e.clock.Now().Add(time.Minute)},
		{ID: "a", RelayURL: "tcp://a.example:8443", Expires: e.clock.Now().Add(time.Minute)},
		{ID: "gone", RelayURL: "tcp://gone.example:8443", Expires: e.clock.Now()},
		{ID: "self", RelayURL: "tcp://203.0.113.7:8443", Expires: e.clock.Now().Add(time.Minute)},
	} {
		if err := e.db.PutProcess(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.client("").Relay(ctx)
	if want := []string{"tcp://203.0.113.7:8443", "tcp://a.example:8443", "http://b.example/api/v0.10/relay"}; err != nil || !slices.Equal(r.Relays, want) {
		t.Fatalf("relay %+v, %v; want relays %q", r, err, want)
	}
	if _, err := alice.DeleteEndpoint(ctx, "laptop"); err != nil || len(revoked) != 3 {
		t.Fatalf("delete: %v; relay told of revocations %v", err, revoked)
	}
}

// usable reports whether the setup key with secret pairs endpointID; it
// uses the key up.
func usable(t *testing.T, e *env, secret, endpointID string) bool {
	t.Helper()
	id, _, err := e.db.UseSetupKey(t.Context(), domain.SetupKeyHash(secret), e.clock.Now())
	return err == nil && id == endpointID
}

// Without a relay no connect endpoint is made: not even half of one, an
// endpoint without a setup key.
func TestConnectWithoutRelay(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	_, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("laptop"), AuthMethod: new("connect")})
	if ae := wantAPIError(t, err, 502, "Unavailable"); !strings.Contains(ae.Message, "relay") {
		t.Fatalf("message %q does not name the relay", ae.Message)
	}
	if l, err := alice.EndpointSearch(t.Context(), api.EndpointQuery{Scope: api.ScopeMine}); err != nil || len(l.Data) != 0 {
		t.Fatalf("endpoints after a failed creation: %+v, %v", l.Data, err)
	}
	_, err = e.client("").Relay(t.Context())
	wantAPIError(t, err, 404, "NotFound")
	if _, err := (tunnel.Dialer{}).Dial(t.Context(), e.srv.URL+api.Prefix+"/relay"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("upgrade to no relay: %v", err)
	}
}

// The relay route hands connections that ask for an upgrade to the relay.
func TestRelayUpgrade(t *testing.T) {
	relayed := make(chan net.Conn, 1)
	e := newEnv(t, func(s *setup) {
		s.Agents, s.CAPin, s.RelayProtocol = agents{}, "PIN", tunnel.Upgrade
		s.RelayConn = func(c net.Conn, head []byte) {
			if _, err := io.WriteString(c, tunnel.UpgradeReply); err != nil {
				t.Error(err)
			}
			relayed <- tunnel.Prefixed(c, head)
		}
		s.RelayURL = "http://service.example" + api.Prefix + "/relay"
	})
	c, err := tunnel.Dialer{}.Dial(t.Context(), e.srv.URL+api.Prefix+"/relay")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "hello, relay")
	var got net.Conn
	select {
	case got = <-relayed:
		defer got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the relay got no connection")
	}
	buf := make([]byte, len("hello, relay"))
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "hello, relay" {
		t.Fatalf("the relay read %q, %v", buf, err)
	}
	// Without an upgrade the route describes the relays.
	if r, err := e.client("").Relay(t.Context()); err != nil || len(r.Relays) == 0 {
		t.Fatalf("relay document %+v, %v", r, err)
	}
}
