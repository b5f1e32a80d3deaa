package core_test

import (
	"fmt"
	"testing"

	"ferry/service/domain"
)

// TestMyProxyEndpointSpec: a gsi endpoint names its MyProxy server,
// host[:port], kept as host:port (lower case, port 7512 by default), and
// optionally the server's DN; other endpoints name none, a DN needs a
// server, and clearing the server clears its DN.
func TestMyProxyEndpointSpec(t *testing.T) {
	s, alice, _ := newService(t)
	ctx := t.Context()
	mk := func(name string, spec domain.EndpointSpec) (domain.EndpointView, error) {
		spec.Name = new(name)
		if spec.Servers == nil {
			spec.Servers = servers("gsiftp://127.0.0.1:2811")
		}
		return s.CreateEndpoint(ctx, alice, spec)
	}
	for _, tc := range []struct{ in, want string }{
		{"MyProxy.Example.org", "myproxy.example.org:7512"},
		{"myproxy.example.org:7000", "myproxy.example.org:7000"},
		{"127.0.0.1", "127.0.0.1:7512"},
		{"[::1]:7513", "[::1]:7513"},
		{"[::1]", "[::1]:7512"},
	} {
		ep, err := mk("g"+fmt.Sprint(len(tc.in)), domain.EndpointSpec{MyProxyServer: new(tc.in)})
		if err != nil || ep.MyProxyServer != tc.want || ep.Auth != domain.AuthGSI {
			t.Errorf("myproxy_server %q: %+v, %v; want %s", tc.in, ep, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		spec domain.EndpointSpec
		msg  string
	}{
		{"a URL", domain.EndpointSpec{MyProxyServer: new("myproxy://h:7512")}, "want host[:port]"},
		{"bad port", domain.EndpointSpec{MyProxyServer: new("h:x")}, "bad port"},
		{"port 0", domain.EndpointSpec{MyProxyServer: new("h:0")}, "bad port"},
		{"no host", domain.EndpointSpec{MyProxyServer: new(":7512")}, "no host"},
		{"a password endpoint", domain.EndpointSpec{MyProxyServer: new("h"), AuthMethod: new(domain.AuthPassword),
			Servers: servers("ftp://127.0.0.1:21")}, "only a gsi endpoint names one"},
		{"a DN without a server", domain.EndpointSpec{MyProxyServerDN: new("/O=Grid/CN=h")}, "names no MyProxy server"},
		{"not a DN", domain.EndpointSpec{MyProxyServer: new("h"), MyProxyServerDN: new("CN=h")}, "one-line DN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mk("bad", tc.spec)
			wantErr(t, err, domain.EInvalid, tc.msg)
		})
	}

	ep, err := mk("grid", domain.EndpointSpec{MyProxyServer: new("mp.example"), MyProxyServerDN: new("/O=Grid/CN=host/mp")})
	if err != nil || ep.MyProxyServer != "mp.example:7512" || ep.MyProxyServerDN != "/O=Grid/CN=host/mp" {
		t.Fatalf("with a DN: %+v, %v", ep, err)
	}
	if got, err := s.FindEndpoint(ctx, alice, "grid"); err != nil || got.MyProxyServer != "mp.example:7512" || got.MyProxyServerDN != "/O=Grid/CN=host/mp" {
		t.Fatalf("shown: %+v, %v", got, err)
	}
	// Made a password endpoint while it names a MyProxy server: refused.
	_, err = s.UpdateEndpoint(ctx, alice, "grid", domain.EndpointSpec{AuthMethod: new(domain.AuthPassword), Servers: servers("ftp://127.0.0.1:21")})
	wantErr(t, err, domain.EInvalid, "")
	if got, err := s.UpdateEndpoint(ctx, alice, "grid", domain.EndpointSpec{MyProxyServer: new("mp.example:7000")}); err != nil ||
		got.MyProxyServer != "mp.example:7000" || got.MyProxyServerDN != "/O=Grid/CN=host/mp" {
		t.Fatalf("another port: %+v, %v", got, err)
	}
	if got, err := s.UpdateEndpoint(ctx, alice, "grid", domain.EndpointSpec{MyProxyServer: new("")}); err != nil ||
		got.MyProxyServer != "" || got.MyProxyServerDN != "" {
		t.Fatalf("cleared: %+v, %v", got, err)
	}
}
