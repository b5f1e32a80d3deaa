package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gsi"
	"ferry/service/api"
	"ferry/service/domain"
	"ferry/service/secret"
)

// Endpoint limits.
const (
	maxServers            = 16
	maxConcurrentLimit    = 10000
	maxActivationLifetime = 7 * 24 * time.Hour
)

// visibleEndpoint finds the endpoint ref names — a UUID, owner#name, or
// a name of the caller's own — if the caller may see it: its own or a
// public one. Anything else is "not found", whether it exists or not.
// role is what the request calls the endpoint, in words ("endpoint",
// "source endpoint"), for the messages.
func (s *Server) visibleEndpoint(r *http.Request, c *call, role, ref string) (domain.Endpoint, error) {
	ctx := r.Context()
	var ep domain.Endpoint
	var err error
	switch {
	case ref == "":
		return ep, domain.Errorf(domain.EInvalid, "no %s given", role)
	case strings.Contains(ref, "#"):
		owner, name := domain.SplitName(ref, c.user.Name)
		ep, err = s.Store.EndpointByName(ctx, owner, name)
	default:
		if ep, err = s.Store.Endpoint(ctx, ref); domain.IsNotFound(err) {
			ep, err = s.Store.EndpointByName(ctx, c.user.Name, ref)
		}
	}
	if domain.IsNotFound(err) || err == nil && !ep.UsableBy(c.user.ID) {
		return domain.Endpoint{}, domain.Errorf(domain.ENotFound, "no %s %q", role, ref)
	}
	return ep, err
}

// ownEndpoint is visibleEndpoint for a change, which only the owner may
// make.
func (s *Server) ownEndpoint(r *http.Request, c *call) (domain.Endpoint, error) {
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err == nil && ep.OwnerID != c.user.ID {
		err = domain.Errorf(domain.EForbidden, "endpoint %s belongs to %s", ep.DisplayName(), ep.Owner)
	}
	return ep, err
}

// activation reports whether the caller has a usable activation for ep
// and for how many seconds (-1: it needs none).
func (s *Server) activation(r *http.Request, c *call, ep domain.Endpoint) (bool, int64, error) {
	if !ep.NeedsActivation() {
		return true, -1, nil
	}
	a, err := s.Store.Activation(r.Context(), c.user.ID, ep.ID)
	now := s.Now()
	if domain.IsNotFound(err) || err == nil && a.Expired(now) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	// Rounded up: an activation is never shown with 0 seconds left.
	return true, int64((a.Expires.Sub(now) + time.Second - 1) / time.Second), nil
}

// endpointLogin is the credential the caller's file operations on ep use.
func (s *Server) endpointLogin(r *http.Request, c *call, ep domain.Endpoint) (domain.Login, error) {
	l, _, err := s.Box.Login(r.Context(), s.Store, c.user.ID, ep, s.Now())
	if ie, ok := errors.AsType[*secret.InactiveError](err); ok {
		return l, domain.Errorf(domain.ENotActivated, "%s", ie.Message)
	}
	return l, err
}

// opsError words a file operation's error for the caller: a rejected
// stored login means the endpoint needs activating again.
func opsError(ep domain.Endpoint, err error) error {
	if domain.ErrorCode(err) == domain.EUnauthorized {
		return domain.Errorf(domain.ENotActivated, "endpoint %s refused the activation's login: activate it again", ep.DisplayName())
	}
	return err
}

func (s *Server) endpointDoc(r *http.Request, c *call, ep domain.Endpoint) (api.Endpoint, error) {
	activated, expiresIn, err := s.activation(r, c, ep)
	d := api.Endpoint{
		DataType: "endpoint", ID: ep.ID, DisplayName: ep.DisplayName(), Owner: ep.Owner, Name: ep.Name,
		Description: ep.Description, DefaultDirectory: cmp.Or(ep.DefaultDir, "/"), Public: ep.Public,
		AuthMethod: ep.Auth, MaxConcurrent: ep.MaxConcurrent, Activated: activated, ExpiresIn: expiresIn,
		Created: ep.Created, Servers: make([]api.Server, len(ep.Servers)), Via: ep.Via, ViaDisplayName: ep.ViaName,
		MyProxyServer: ep.MyProxyServer, MyProxyServerDN: ep.MyProxyServerDN,
	}
	if ep.Auth == domain.AuthConnect && s.Agents != nil {
		ctx, cancel := context.WithCancel(r.Context())
		_, d.Connected = s.Agents.Online(ctx, ep.ID)
		cancel() // only whether it is connected now
	}
	for i, u := range ep.Servers {
		d.Servers[i] = serverDoc(u)
	}
	return d, err
}

// serverDoc describes a server URL the store holds (ftp://host:port).
func serverDoc(uri string) api.Server {
	d := api.Server{DataType: "server", URI: uri}
	if u, err := gridftp.Parse(uri); err == nil {
		d.Scheme, d.Hostname = u.Scheme, u.Host
		d.Port, _ = strconv.Atoi(u.Port)
	}
	return d
}

// serverURI checks a server of a request and writes it as the store keeps
// it: ftp://host:port, or gsiftp://host:port for a GSI server. Its
// messages name the server as the request gave it.
func serverURI(sv api.Server) (string, error) {
	if err := dataType(sv.DataType, "server"); err != nil {
		return "", err
	}
	const want = "want ftp://host:port or gsiftp://host:port"
	named := cmp.Or(sv.URI, sv.Hostname)
	u := gridftp.URL{Scheme: cmp.Or(sv.Scheme, gridftp.FTP), Host: sv.Hostname, Port: strconv.Itoa(sv.Port)}
	var err error
	if sv.URI == "" {
		err = u.Check()
	} else {
		u, err = gridftp.Parse(sv.URI)
		more := u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != ""
		if errors.Is(err, gridftp.ErrNotURL) || more {
			return "", domain.Errorf(domain.EInvalid, "server %q is not a server's URL: %s", sv.URI, want)
		}
	}
	var se *gridftp.SchemeError
	switch {
	case errors.As(err, &se):
		return "", domain.Errorf(domain.EInvalid, "server %q: scheme %q is not supported: %s", named, se.Scheme, want)
	case err == nil && u.SSH():
		return "", domain.Errorf(domain.EInvalid, "server %q: scheme %q is not supported: %s", named, u.Scheme, want)
	case errors.Is(err, gridftp.ErrNoHost) || strings.ContainsAny(u.Host, "/@?#% "):
		return "", domain.Errorf(domain.EInvalid, "server %q names no host: %s", named, want)
	case err != nil:
		return "", domain.Errorf(domain.EInvalid, "server %q: %v", named, err)
	}
	return u.Server(), nil
}

// gsiServer reports a gsiftp:// server (as serverURI writes it), which
// takes grid credentials.
func gsiServer(uri string) bool {
	u, err := gridftp.Parse(uri)
	return err == nil && u.GSI()
}

// checkGSI refuses an endpoint whose auth method and servers disagree: a
// gsi endpoint's servers are gsiftp:// ones, and only a gsi endpoint's.
func checkGSI(ep domain.Endpoint) error {
	for _, sv := range ep.Servers {
		switch gsi := gsiServer(sv); {
		case ep.Auth == domain.AuthGSI && !gsi:
			return domain.Errorf(domain.EInvalid, "server %s: a %s endpoint's servers are gsiftp://host:port", sv, domain.AuthGSI)
		case ep.Auth != domain.AuthGSI && gsi:
			return domain.Errorf(domain.EInvalid, "server %s: a gsiftp:// server takes grid credentials: the endpoint's auth method must be %s", sv, domain.AuthGSI)
		}
	}
	if ep.Auth == domain.AuthGSI && ep.Via != "" {
		return domain.Errorf(domain.EInvalid, "via: a %s endpoint cannot be reached through a head node (yet)", domain.AuthGSI)
	}
	return checkMyProxy(ep)
}

// resolveWithin bounds the name lookups of checkServers.
const resolveWithin = 5 * time.Second

// checkServers refuses a server (as serverURI writes it) whose address
// the network policy refuses, or whose name resolves to one.
func (s *Server) checkServers(ctx context.Context, servers []string) error {
	for _, sv := range servers {
		u, err := gridftp.Parse(sv)
		if err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, resolveWithin)
		err = s.Networks.CheckHost(lctx, u.Host)
		cancel()
		if err != nil {
			return domain.Errorf(domain.EInvalid, "server %s: %v", sv, err)
		}
	}
	return nil
}

// applySpec changes ep as spec says.
func applySpec(ep *domain.Endpoint, spec api.EndpointSpec) error {
	if err := dataType(spec.DataType, "endpoint"); err != nil {
		return err
	}
	if spec.Name != nil {
		if err := domain.ValidName(*spec.Name); err != nil {
			return err
		}
		ep.Name = *spec.Name
	}
	if spec.Description != nil {
		if err := checkText("description", *spec.Description, 1000); err != nil {
			return err
		}
		ep.Description = *spec.Description
	}
	if spec.Servers != nil {
		if ep.Auth == domain.AuthConnect {
			return domain.Errorf(domain.EInvalid, "a connect endpoint has no servers: its agent (ferry connect) serves it")
		}
		if len(spec.Servers) == 0 || len(spec.Servers) > maxServers {
			return domain.Errorf(domain.EInvalid, "an endpoint has 1 to %d servers", maxServers)
		}
		ep.Servers = nil
		for _, sv := range spec.Servers {
			u, err := serverURI(sv)
			if err != nil {
				return err
			}
			ep.Servers = append(ep.Servers, u)
		}
	}
	if spec.DefaultDirectory != nil {
		d, err := domain.CleanPath(*spec.DefaultDirectory, "/")
		if err != nil {
			return err
		}
		ep.DefaultDir = d
	}
	if spec.Public != nil {
		ep.Public = *spec.Public
	}
	if spec.AuthMethod != nil && *spec.AuthMethod != ep.Auth {
		switch {
		case ep.Auth == domain.AuthConnect || *spec.AuthMethod == domain.AuthConnect:
			return domain.Errorf(domain.EInvalid, "auth method: an endpoint is a %s endpoint from its creation on, or never", domain.AuthConnect)
		case !slices.Contains(domain.AuthMethods, *spec.AuthMethod):
			return domain.Errorf(domain.EInvalid, "auth method %q: want one of %s", *spec.AuthMethod, strings.Join(domain.AuthMethods, ", "))
		}
		ep.Auth = *spec.AuthMethod
	}
	if spec.MaxConcurrent != nil {
		if *spec.MaxConcurrent < 0 || *spec.MaxConcurrent > maxConcurrentLimit {
			return domain.Errorf(domain.EInvalid, "at most %d concurrent tasks: want 0 (no limit) to %d", *spec.MaxConcurrent, maxConcurrentLimit)
		}
		ep.MaxConcurrent = *spec.MaxConcurrent
	}
	return applyMyProxy(ep, spec)
}

// applyVia sets the relay spec.Via names ("": none): an endpoint the
// owner may use, reached directly, not ep itself, neither it nor ep a
// connect endpoint, and ep no other endpoint's relay (one level).
func (s *Server) applyVia(r *http.Request, c *call, ep *domain.Endpoint, spec api.EndpointSpec) error {
	if spec.Via == nil {
		return nil
	}
	if *spec.Via == "" {
		ep.Via, ep.ViaName = "", ""
		return nil
	}
	if ep.Auth == domain.AuthConnect {
		return domain.Errorf(domain.EInvalid, "via: a connect endpoint is reached through its agent, not through a head node")
	}
	via, err := s.visibleEndpoint(r, c, "head node (via) endpoint", *spec.Via)
	switch {
	case err != nil:
		return err
	case via.ID == ep.ID:
		return domain.Errorf(domain.EInvalid, "via: endpoint %s cannot be reached through itself", via.DisplayName())
	case via.Via != "":
		return domain.Errorf(domain.EInvalid, "via: endpoint %s is itself reached only through %s: a head node must be reached directly",
			via.DisplayName(), via.ViaName)
	case via.Auth == domain.AuthConnect:
		return domain.Errorf(domain.EInvalid, "via: endpoint %s is a connect endpoint, whose agent cannot forward to another host", via.DisplayName())
	}
	if ep.ID != "" {
		if err := s.notRelay(r, *ep, "be reached through a head node"); err != nil {
			return err
		}
	}
	ep.Via, ep.ViaName = via.ID, via.DisplayName()
	return nil
}

// notRelay refuses to let ep, the relay of other endpoints, do what.
func (s *Server) notRelay(r *http.Request, ep domain.Endpoint, what string) error {
	behind, err := s.Store.EndpointsVia(r.Context(), ep.ID)
	if err != nil || len(behind) == 0 {
		return err
	}
	names := make([]string, len(behind))
	for i, b := range behind {
		names[i] = b.DisplayName()
	}
	return domain.Errorf(domain.EConflict, "endpoint %s is the head node of %s, so it cannot %s: change their via first",
		ep.DisplayName(), strings.Join(names, ", "), what)
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err != nil {
		return err
	}
	d, err := s.endpointDoc(r, c, ep)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, d)
}

func (s *Server) endpointSearch(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseEndpointQuery(r.URL.Query())
	if err != nil {
		return err
	}
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	eps, total, err := s.Store.Endpoints(r.Context(), c.user.ID, q.Text, q.Scope == api.ScopeMine, page)
	if err != nil {
		return err
	}
	doc := api.EndpointList{DataType: "endpoint_list", PageInfo: pageInfo(page, len(eps), total), Data: make([]api.Endpoint, len(eps))}
	for i, ep := range eps {
		if doc.Data[i], err = s.endpointDoc(r, c, ep); err != nil {
			return err
		}
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	var spec api.EndpointSpec
	if err := decode(r, &spec, false); err != nil {
		return err
	}
	connect := spec.AuthMethod != nil && *spec.AuthMethod == domain.AuthConnect
	if spec.Name == nil || spec.Servers == nil && !connect {
		return domain.Errorf(domain.EInvalid, "an endpoint needs a name and its servers")
	}
	ep := domain.Endpoint{OwnerID: c.user.ID, Owner: c.user.Name, Auth: domain.AuthAnonymous, DefaultDir: "/"}
	if connect {
		ep.Auth = domain.AuthConnect
	}
	if err := applySpec(&ep, spec); err != nil {
		return err
	}
	if spec.AuthMethod == nil && len(ep.Servers) > 0 && gsiServer(ep.Servers[0]) {
		ep.Auth = domain.AuthGSI // gsiftp:// servers take grid credentials
	}
	if err := s.applyVia(r, c, &ep, spec); err != nil {
		return err
	}
	if err := checkGSI(ep); err != nil {
		return err
	}
	if connect {
		return s.createConnectEndpoint(w, r, c, ep)
	}
	if err := s.checkServers(r.Context(), ep.Servers); err != nil {
		return err
	}
	if err := s.checkMyProxyHost(r.Context(), ep.MyProxyServer); err != nil {
		return err
	}
	if err := s.Store.CreateEndpoint(r.Context(), &ep); err != nil {
		return err
	}
	d, err := s.endpointDoc(r, c, ep)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, d)
}

func (s *Server) updateEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	var spec api.EndpointSpec
	if err := decode(r, &spec, false); err != nil {
		return err
	}
	ep, err := s.ownEndpoint(r, c)
	if err != nil {
		return err
	}
	if err := applySpec(&ep, spec); err != nil {
		return err
	}
	if err := s.applyVia(r, c, &ep, spec); err != nil {
		return err
	}
	if err := checkGSI(ep); err != nil {
		return err
	}
	if spec.Servers != nil {
		if err := s.checkServers(r.Context(), ep.Servers); err != nil {
			return err
		}
	}
	if spec.MyProxyServer != nil {
		if err := s.checkMyProxyHost(r.Context(), ep.MyProxyServer); err != nil {
			return err
		}
	}
	if err := s.Store.UpdateEndpoint(r.Context(), ep); err != nil {
		return err
	}
	d, err := s.endpointDoc(r, c, ep)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, d)
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.ownEndpoint(r, c)
	if err != nil {
		return err
	}
	if err := s.notRelay(r, ep, "be deleted"); err != nil {
		return err
	}
	if err := s.Store.DeleteEndpoint(r.Context(), ep.ID); err != nil {
		return err
	}
	s.revoked(ep)
	return result(w, r, "result", "Deleted", fmt.Sprintf("endpoint %s is deleted", ep.DisplayName()))
}

func (s *Server) activationRequirements(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err != nil {
		return err
	}
	activated, expiresIn, err := s.activation(r, c, ep)
	if err != nil {
		return err
	}
	doc := api.ActivationRequirements{DataType: "activation_requirements", Activated: activated, ExpiresIn: expiresIn, Data: []api.ActivationRequirement{}}
	if activated && ep.NeedsActivation() {
		if a, err := s.Store.Activation(r.Context(), c.user.ID, ep.ID); err == nil {
			doc.Subject = a.Subject
		}
	}
	switch {
	case ep.Auth == domain.AuthGSI:
		doc.Data = []api.ActivationRequirement{
			{DataType: "activation_requirement", Type: "proxy", Name: "proxy", UIName: "Grid proxy",
				Description: "a grid proxy in PEM (certificate, key, chain), as grid-proxy-init or myproxy-logon writes it; " +
					"the activation lasts as long as the proxy", Required: true, Private: true},
			{DataType: "activation_requirement", Type: "proxy", Name: "username", UIName: "Username",
				Description: "the user to log in as on the endpoint's servers (default: their grid-mapfile's mapping of the proxy's identity)"},
		}
		if ep.MyProxyServer != "" {
			// Either a proxy, or a MyProxy username and pass phrase.
			doc.Data[0].Required = false
			doc.Data[0].Description += "; or give your MyProxy username and pass phrase instead"
			doc.Data = append(doc.Data,
				api.ActivationRequirement{DataType: "activation_requirement", Type: "myproxy", Name: "myproxy_username", UIName: "MyProxy username",
					Description: fmt.Sprintf("your username on the MyProxy server %s, which gives the service a proxy of yours "+
						"(instead of proxy); it activates every endpoint that names that server", ep.MyProxyServer)},
				api.ActivationRequirement{DataType: "activation_requirement", Type: "myproxy", Name: "myproxy_passphrase", UIName: "MyProxy pass phrase",
					Description: "the pass phrase of your credential on the MyProxy server: used once, never stored", Private: true})
		}
	case ep.NeedsActivation():
		doc.Data = []api.ActivationRequirement{
			{DataType: "activation_requirement", Type: "password", Name: "username", UIName: "Username",
				Description: "your user name on the endpoint's servers", Required: true},
			{DataType: "activation_requirement", Type: "password", Name: "password", UIName: "Password",
				Description: "your password on the endpoint's servers", Required: true, Private: true},
		}
	}
	return reply(w, http.StatusOK, doc)
}

// activate checks a login by logging in to the endpoint, keeps it sealed
// until it expires, and resumes the caller's tasks that waited for it.
func (s *Server) activate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Activate
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "activation"); err != nil {
		return err
	}
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err != nil {
		return err
	}
	doc := api.ActivationResult{DataType: "activation_result", RequestID: c.id, Resource: r.URL.Path}
	if !ep.NeedsActivation() {
		doc.Code, doc.Message, doc.ExpiresIn = "AlreadyActivated", fmt.Sprintf("endpoint %s needs no activation", ep.DisplayName()), -1
		return reply(w, http.StatusOK, doc)
	}
	lifetime := domain.DefaultActivationLifetime
	if req.Lifetime < 0 || time.Duration(req.Lifetime) > maxActivationLifetime/time.Second {
		return domain.Errorf(domain.EInvalid, "lifetime %d: want 1 to %d seconds", req.Lifetime, int64(maxActivationLifetime/time.Second))
	}
	if req.Lifetime > 0 {
		lifetime = time.Duration(req.Lifetime) * time.Second
	}
	viaMyProxy := req.MyProxyUsername != "" || req.MyProxyPassphrase != ""
	if viaMyProxy {
		var asked time.Duration
		if req.Lifetime > 0 {
			asked = lifetime
		}
		pem, err := s.myproxyLogin(r.Context(), ep, req, asked)
		if err != nil {
			return err
		}
		req = api.Activate{Username: req.Username, Proxy: pem, Lifetime: req.Lifetime}
	}
	now := s.Now()
	expires := now.Add(lifetime)
	var l domain.Login
	var subject string
	if ep.Auth == domain.AuthGSI {
		var err error
		if l, subject, expires, err = gsiLogin(ep, req, now); err != nil {
			if viaMyProxy {
				return domain.Errorf(domain.ErrorCode(err), "the proxy from MyProxy server %s: %s", ep.MyProxyServer, domain.ErrorMessage(err))
			}
			return err
		}
		if req.Lifetime > 0 && now.Add(lifetime).Before(expires) {
			expires = now.Add(lifetime)
		}
	} else {
		if viaMyProxy {
			// myproxyLogin refused it already.
			return domain.Errorf(domain.EInvalid, "a MyProxy username: endpoint %s is not a %s endpoint", ep.DisplayName(), domain.AuthGSI)
		}
		if req.Proxy != "" {
			return domain.Errorf(domain.EInvalid, "proxy: endpoint %s is a %s endpoint; a grid proxy activates %s endpoints only",
				ep.DisplayName(), ep.Auth, domain.AuthGSI)
		}
		if req.Username == "" || req.Password == "" {
			return domain.Errorf(domain.EInvalid, "username and password are required")
		}
		l = domain.Login{User: req.Username, Password: req.Password}
	}
	if ep.Via != "" {
		// The service cannot reach it to log in: a wrong login fails
		// the transfers to it, as the head node's forwarding reports.
	} else if err := s.Ops.Check(r.Context(), ep, l); domain.ErrorCode(err) == domain.EUnauthorized {
		who := fmt.Sprintf("%q", req.Username)
		if subject != "" {
			who = fmt.Sprintf("the grid proxy of %q", subject)
		}
		if viaMyProxy {
			who = fmt.Sprintf("the grid proxy of %q from MyProxy server %s", subject, ep.MyProxyServer)
		}
		return domain.Errorf(domain.EInvalid, "endpoint %s refused the login of %s: %s", ep.DisplayName(), who, domain.ErrorMessage(err))
	} else if err != nil {
		return err
	}
	sealed, err := s.Box.Seal(l, secret.Context(c.user.ID, ep.ID))
	if err != nil {
		return err
	}
	a := domain.Activation{UserID: c.user.ID, EndpointID: ep.ID, Sealed: sealed, Expires: expires, Created: now, Subject: subject}
	if err := s.Store.PutActivation(r.Context(), a); err != nil {
		return err
	}
	if doc.Resumed, err = s.Store.Reactivate(r.Context(), c.user.ID, ep.ID, now); err != nil {
		return err
	}
	var shared []api.ActivatedEndpoint
	if viaMyProxy {
		doc.Endpoints = []api.ActivatedEndpoint{{DataType: "activated_endpoint", ID: ep.ID, DisplayName: ep.DisplayName(),
			ExpiresIn: int64(expires.Sub(now) / time.Second), Resumed: doc.Resumed}}
		var n int
		shared, n, err = s.shareActivation(r, c, ep, l, a)
		doc.Endpoints, doc.Resumed = append(doc.Endpoints, shared...), doc.Resumed+n
		if err != nil {
			if doc.Resumed > 0 {
				s.queued()
			}
			return err
		}
	}
	if doc.Resumed > 0 {
		s.queued()
	}
	doc.Code, doc.ExpiresIn, doc.Subject = "Activated", int64(expires.Sub(now)/time.Second), subject
	doc.Message = fmt.Sprintf("endpoint %s is activated until %s", ep.DisplayName(), a.Expires.UTC().Format(time.RFC3339))
	if subject != "" {
		doc.Message = fmt.Sprintf("endpoint %s is activated as %s until %s", ep.DisplayName(), subject, a.Expires.UTC().Format(time.RFC3339))
	}
	if viaMyProxy {
		doc.Message += fmt.Sprintf(" with a proxy from MyProxy server %s", ep.MyProxyServer)
		switch {
		case len(shared) == 1:
			doc.Message += fmt.Sprintf("; so is %s, which names the same MyProxy server", sharedNames(shared))
		case len(shared) > 1:
			doc.Message += fmt.Sprintf("; so are %s, which name the same MyProxy server", sharedNames(shared))
		}
	}
	if ep.Via != "" {
		doc.Message += fmt.Sprintf("; the login is not checked: the service reaches the endpoint only through %s", ep.ViaName)
	}
	return reply(w, http.StatusOK, doc)
}

// minProxyLife is the least lifetime a proxy must have left to activate
// an endpoint: less could not even start a task.
const minProxyLife = 10 * time.Second

// maxProxySize bounds an uploaded proxy: a certificate chain of a few
// levels and a key.
const maxProxySize = 64 << 10

// gsiLogin checks the grid proxy of a gsi activation — it parses, holds
// its key, names an identity and is not about to expire — and returns the
// login to seal (the proxy as PEM, re-encoded), its identity and its
// NotAfter. The proxy never appears in messages or logs.
func gsiLogin(ep domain.Endpoint, req api.Activate, now time.Time) (domain.Login, string, time.Time, error) {
	if req.Password != "" {
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid,
			"password: endpoint %s is a %s endpoint: activate it with a grid proxy (proxy), not a password", ep.DisplayName(), domain.AuthGSI)
	}
	switch {
	case req.Proxy == "":
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid,
			"proxy is required: endpoint %s is a %s endpoint, activated with a grid proxy (grid-proxy-init)", ep.DisplayName(), domain.AuthGSI)
	case len(req.Proxy) > maxProxySize:
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.ELimit, "proxy: over %d bytes", maxProxySize)
	}
	cred, err := gsi.ParseCredential([]byte(req.Proxy))
	if err != nil {
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid, "proxy: not a grid proxy: %v", err)
	}
	id, notAfter := cred.Identity(), cred.NotAfter()
	switch {
	case id == "":
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid, "proxy: it names no identity")
	case !now.Before(notAfter):
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid,
			"proxy: the grid proxy of %s expired at %s: make a new one (grid-proxy-init)", id, notAfter.UTC().Format(time.RFC3339))
	case notAfter.Sub(now) < minProxyLife:
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid,
			"proxy: the grid proxy of %s expires at %s, in under %v: make a new one (grid-proxy-init)", id, notAfter.UTC().Format(time.RFC3339), minProxyLife)
	case now.Before(cred.Chain[0].NotBefore.Add(-5 * time.Minute)):
		return domain.Login{}, "", time.Time{}, domain.Errorf(domain.EInvalid, "proxy: the grid proxy of %s is not valid before %s",
			id, cred.Chain[0].NotBefore.UTC().Format(time.RFC3339))
	}
	if err := checkText("username", req.Username, 256); err != nil {
		return domain.Login{}, "", time.Time{}, err
	}
	return domain.Login{User: req.Username, Proxy: string(cred.Encode())}, id, notAfter, nil
}

// deactivate forgets the caller's activation and pauses its tasks on the
// endpoint.
func (s *Server) deactivate(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err != nil {
		return err
	}
	if !ep.NeedsActivation() {
		return domain.Errorf(domain.EInvalid, "endpoint %s needs no activation", ep.DisplayName())
	}
	if err := s.Store.DeleteActivation(r.Context(), c.user.ID, ep.ID); err != nil && !domain.IsNotFound(err) {
		return err
	}
	n, err := s.Store.Deactivate(r.Context(), c.user.ID, ep.ID, domain.NiceNotActivated, s.Now())
	if err != nil {
		return err
	}
	return result(w, r, "result", "Deactivated", fmt.Sprintf("endpoint %s is deactivated; %d waiting tasks paused", ep.DisplayName(), n))
}

// fileOp finds the endpoint of a file operation (what) and the caller's
// login for it. An endpoint behind a relay is refused: the service
// cannot reach it.
func (s *Server) fileOp(r *http.Request, c *call, what string) (domain.Endpoint, domain.Login, error) {
	ep, err := s.visibleEndpoint(r, c, "endpoint", r.PathValue("id"))
	if err != nil {
		return ep, domain.Login{}, err
	}
	if ep.Via != "" {
		return ep, domain.Login{}, ep.ViaError(what)
	}
	l, err := s.endpointLogin(r, c, ep)
	return ep, l, err
}

// serverState probes each of the endpoint's servers with the caller's
// login: up or not, its stripes, a ferry front end's movers.
func (s *Server) serverState(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, l, err := s.fileOp(r, c, "probe its servers")
	if err != nil {
		return err
	}
	states, err := s.Ops.ServerStates(r.Context(), ep, l)
	if err != nil {
		return opsError(ep, err)
	}
	doc := api.ServerStateList{DataType: "server_state_list", Data: make([]api.ServerState, len(states))}
	for i, st := range states {
		d := api.ServerState{DataType: "server_state", URI: st.URI, Up: st.Up, Error: st.Error, Stripes: st.Stripes,
			Movers: make([]api.MoverState, len(st.Movers))}
		for j, m := range st.Movers {
			d.Movers[j] = api.MoverState{DataType: "mover_state", Index: m.Index, Address: m.Addr, Up: m.Up, Reason: m.Reason}
		}
		doc.Data[i] = d
	}
	return reply(w, http.StatusOK, doc)
}

// ls answers a page of a directory's listing, sorted by name or, with
// orderby=none, in the order the endpoint lists it: the first page lists
// the directory on its endpoint, later ones read that listing (see
// listings); an unsorted page waits only for its own entries.
func (s *Server) ls(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	ep, l, err := s.fileOp(r, c, "list")
	if err != nil {
		return err
	}
	p, err := domain.CleanPath(q.Path, ep.DefaultDir)
	if err != nil {
		return err
	}
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	filter := q
	filter.Page = api.Page{}
	key := strings.Join([]string{strconv.FormatInt(c.user.ID, 10), ep.ID, l.User, p, filter.Values().Encode()}, "\x00")
	list := func(ctx context.Context, fn func(domain.FileInfo) error) error {
		return s.Ops.List(ctx, ep, l, p, func(f domain.FileInfo) error {
			if !q.Keeps(f.Name, f.Type) {
				return nil
			}
			return fn(f)
		})
	}
	lst, err := s.listings.get(key, page.Offset == 0, s.Now(), func() (*listing, error) {
		if q.Unsorted {
			return s.listings.streamListing(r.Context(), list, s.Now())
		}
		return makeListing(func(fn func(domain.FileInfo) error) error { return list(r.Context(), fn) }, listingRun, s.Now())
	})
	if err != nil {
		return opsError(ep, err)
	}
	defer s.listings.release(lst)
	shown, total, err := lst.page(r.Context(), page.Offset, page.Limit)
	if err != nil {
		return opsError(ep, err)
	}
	doc := api.FileList{DataType: "file_list", Endpoint: ep.ID, Path: p, PageInfo: pageInfo(page, len(shown), total),
		HasNextPage: page.Offset+len(shown) < total, Data: make([]api.File, len(shown))}
	for i, f := range shown {
		doc.Data[i] = api.File{DataType: "file", Name: f.Name, Type: f.Type, Size: f.Size, Permissions: f.Permissions, User: f.User, Group: f.Group, LastModified: f.Modified}
	}
	return reply(w, http.StatusOK, doc)
}

// opPath cleans a required path of a file operation.
func opPath(field, p string) (string, error) {
	if p == "" {
		return "", domain.Errorf(domain.EInvalid, "%s is required", field)
	}
	return domain.CleanPath(p, "")
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Mkdir
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "mkdir"); err != nil {
		return err
	}
	p, err := opPath("path", req.Path)
	if err != nil {
		return err
	}
	ep, l, err := s.fileOp(r, c, "make a directory")
	if err != nil {
		return err
	}
	if err := s.Ops.Mkdir(r.Context(), ep, l, p); err != nil {
		return opsError(ep, err)
	}
	return result(w, r, "mkdir_result", "DirectoryCreated", fmt.Sprintf("%s is created", p))
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Rename
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "rename"); err != nil {
		return err
	}
	from, err := opPath("old_path", req.OldPath)
	if err != nil {
		return err
	}
	to, err := opPath("new_path", req.NewPath)
	if err != nil {
		return err
	}
	ep, l, err := s.fileOp(r, c, "rename")
	if err != nil {
		return err
	}
	if err := s.Ops.Rename(r.Context(), ep, l, from, to, req.Overwrite); err != nil {
		return opsError(ep, err)
	}
	return result(w, r, "rename_result", "FileRenamed", fmt.Sprintf("%s is renamed to %s", from, to))
}
