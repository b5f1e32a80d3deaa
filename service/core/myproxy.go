package core

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"ferry/gsi/myproxy"
	"ferry/service/domain"
	"ferry/service/secret"
)

// Activation through a MyProxy server (issue 14): a gsi endpoint names
// its MyProxy server; the user gives the service a MyProxy username and
// pass phrase, the service fetches a short-lived proxy with them and
// activates with it — the endpoint and every other gsi endpoint of the
// user's naming the same server, as in the Globus Online paper. The pass
// phrase goes to the MyProxy server and nowhere else: not to the store,
// not to a log, not into a message.

// maxPassphrase bounds a MyProxy pass phrase (the server's request is
// bounded too).
const maxPassphrase = 1024

// defaultMyProxyWithin bounds a MyProxy logon.
const defaultMyProxyWithin = 30 * time.Second

// myproxyServer checks a MyProxy server of a request (host[:port]) and
// writes it as the store keeps it: host:port, the host in lower case, the
// port 7512 unless given. Endpoints naming one server share activations,
// so one server has one spelling.
func myproxyServer(s string) (string, error) {
	bad := func(why string) error {
		return domain.Errorf(domain.EInvalid, "MyProxy server %q: %s: want host[:port]", s, why)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/@?#% \t") {
		return "", bad("not a host name")
	}
	host, port := s, myproxy.DefaultPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Count(s, ":") == 1 {
		return "", bad("bad port")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	} else if host == "" || strings.ContainsAny(host, ":[]") {
		return "", bad("no host")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", bad("bad port")
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n)), nil
}

// applyMyProxy sets the MyProxy server and its DN a spec names.
func applyMyProxy(ep *domain.Endpoint, spec domain.EndpointSpec) error {
	if spec.MyProxyServer != nil {
		ep.MyProxyServer = ""
		if *spec.MyProxyServer != "" {
			srv, err := myproxyServer(*spec.MyProxyServer)
			if err != nil {
				return err
			}
			ep.MyProxyServer = srv
		}
		if *spec.MyProxyServer == "" && spec.MyProxyServerDN == nil {
			ep.MyProxyServerDN = "" // no server, no DN
		}
	}
	if spec.MyProxyServerDN != nil {
		dn := *spec.MyProxyServerDN
		if err := checkText("myproxy_server_dn", dn, 1024); err != nil {
			return err
		}
		if dn != "" && !strings.HasPrefix(dn, "/") {
			return domain.Errorf(domain.EInvalid, "MyProxy server DN %q: want a one-line DN, /O=.../CN=...", dn)
		}
		ep.MyProxyServerDN = dn
	}
	return nil
}

// checkMyProxy refuses a MyProxy server and DN that do not fit ep: only
// a gsi endpoint names one, and a DN goes with a server.
func checkMyProxy(ep domain.Endpoint) error {
	switch {
	case ep.MyProxyServer != "" && ep.Auth != domain.AuthGSI:
		return domain.Errorf(domain.EInvalid, "a MyProxy server gives grid proxies: only a %s endpoint names one (this one's auth method is %s)",
			domain.AuthGSI, ep.Auth)
	case ep.MyProxyServerDN != "" && ep.MyProxyServer == "":
		return domain.Errorf(domain.EInvalid, "a MyProxy server DN, but the endpoint names no MyProxy server")
	}
	return nil
}

// checkMyProxyHost refuses a MyProxy server whose address the network
// policy refuses, as checkServers does endpoints' servers.
func (s *Service) checkMyProxyHost(ctx context.Context, server string) error {
	if server == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(server)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, resolveWithin)
	defer cancel()
	if err := s.Networks.CheckHost(lctx, host); err != nil {
		return domain.Errorf(domain.EInvalid, "MyProxy server %s: %v", server, err)
	}
	return nil
}

// myproxyLogin fetches the user's proxy from ep's MyProxy server with
// the username and pass phrase of req, asking for lifetime (0: the
// server's default for myproxy-logon, 12 hours). Its errors name the
// server and the username, never the pass phrase.
func (s *Service) myproxyLogin(ctx context.Context, ep domain.Endpoint, req domain.ActivateRequest, lifetime time.Duration) (string, error) {
	switch {
	case ep.Auth != domain.AuthGSI:
		return "", domain.Errorf(domain.EInvalid, "a MyProxy username: endpoint %s is a %s endpoint; a MyProxy server activates %s endpoints only",
			ep.DisplayName(), ep.Auth, domain.AuthGSI)
	case ep.MyProxyServer == "":
		return "", domain.Errorf(domain.EInvalid, "a MyProxy username: endpoint %s names no MyProxy server: activate it with a grid proxy",
			ep.DisplayName())
	case req.Proxy != "" || req.Password != "":
		return "", domain.Errorf(domain.EInvalid, "give either a grid proxy or a MyProxy username and pass phrase, not both")
	case req.MyProxyUsername == "" || req.MyProxyPassphrase == "":
		return "", domain.Errorf(domain.EInvalid, "a MyProxy username and pass phrase are both required to activate through MyProxy server %s",
			ep.MyProxyServer)
	case len(req.MyProxyPassphrase) > maxPassphrase:
		return "", domain.Errorf(domain.ELimit, "myproxy_passphrase: over %d bytes", maxPassphrase)
	case strings.ContainsAny(req.MyProxyPassphrase, "\n\r\x00"):
		return "", domain.Errorf(domain.EInvalid, "the MyProxy pass phrase holds a newline or NUL")
	case s.Trust == nil:
		return "", domain.Errorf(domain.EUnavailable, "the service has no grid CAs to check MyProxy server %s with (ferry server --gsi-ca-dir)",
			ep.MyProxyServer)
	}
	if err := checkText("myproxy_username", req.MyProxyUsername, 256); err != nil {
		return "", err
	}
	if err := s.checkMyProxyHost(ctx, ep.MyProxyServer); err != nil {
		return "", err
	}
	logon := s.MyProxyLogon
	if logon == nil {
		logon = myproxy.Logon
	}
	within := s.MyProxyWithin
	if within <= 0 {
		within = defaultMyProxyWithin
	}
	lctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cred, err := logon(lctx, ep.MyProxyServer, myproxy.Options{Username: req.MyProxyUsername, Passphrase: req.MyProxyPassphrase,
		Lifetime: lifetime, Trust: s.Trust, ServerDN: ep.MyProxyServerDN, Dial: s.Networks.Dial})
	var se *myproxy.ServerError
	switch {
	case errors.Is(err, myproxy.ErrBadPassphrase):
		return "", domain.Errorf(domain.EInvalid, "MyProxy server %s refused the pass phrase of %q: no endpoint is activated",
			ep.MyProxyServer, req.MyProxyUsername)
	case errors.Is(err, myproxy.ErrNoCredentials):
		return "", domain.Errorf(domain.EInvalid, "MyProxy server %s holds no credential of %q (store one with myproxy-init): no endpoint is activated",
			ep.MyProxyServer, req.MyProxyUsername)
	case errors.As(err, &se):
		return "", domain.Errorf(domain.EInvalid, "MyProxy server %s refused to give a proxy of %q: %s: no endpoint is activated",
			ep.MyProxyServer, req.MyProxyUsername, strings.Join(se.Lines, "; "))
	case err != nil:
		return "", domain.Errorf(domain.EUnavailable, "MyProxy server %s: %v: no endpoint is activated", ep.MyProxyServer, err)
	}
	return string(cred.Encode()), nil
}

// shareActivation stores the activation of u's login l (a
// proxy fetched from ep's MyProxy server) for every other gsi endpoint
// the user may use that names the same server, each sealed for its
// endpoint, and resumes their INACTIVE tasks. They are not logged in to
// first: the proxy is the user's, for whichever server takes it.
func (s *Service) shareActivation(ctx context.Context, u domain.User, ep domain.Endpoint, l domain.Login, a domain.Activation) ([]domain.ActivatedEndpoint, int, error) {
	eps, err := s.Store.EndpointsByMyProxy(ctx, u.ID, ep.MyProxyServer)
	if err != nil {
		return nil, 0, err
	}
	var out []domain.ActivatedEndpoint
	resumed := 0
	for _, o := range eps {
		if o.ID == ep.ID {
			continue
		}
		sealed, err := s.Box.Seal(l, secret.Context(u.ID, o.ID))
		if err != nil {
			return out, resumed, err
		}
		oa := a
		oa.EndpointID, oa.Sealed = o.ID, sealed
		if err := s.Store.PutActivation(ctx, oa); err != nil {
			return out, resumed, err
		}
		n, err := s.Store.Reactivate(ctx, u.ID, o.ID, a.Created)
		if err != nil {
			return out, resumed, err
		}
		resumed += n
		out = append(out, domain.ActivatedEndpoint{ID: o.ID, DisplayName: o.DisplayName(),
			ExpiresIn: int64(a.Expires.Sub(a.Created) / time.Second), Resumed: n})
	}
	return out, resumed, nil
}

// sharedNames lists the display names of endpoints.
func sharedNames(eps []domain.ActivatedEndpoint) string {
	names := make([]string, len(eps))
	for i, e := range eps {
		names[i] = e.DisplayName
	}
	return strings.Join(names, ", ")
}
