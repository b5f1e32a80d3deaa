package core

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"ferry/gridftp"
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
// a name of the user's own — if the user may see it: its own or a
// public one. Anything else is "not found", whether it exists or not.
// role is what the request calls the endpoint, in words ("endpoint",
// "source endpoint"), for the messages.
func (s *Service) visibleEndpoint(ctx context.Context, u domain.User, role, ref string) (domain.Endpoint, error) {
	var ep domain.Endpoint
	var err error
	switch {
	case ref == "":
		return ep, domain.Errorf(domain.EInvalid, "no %s given", role)
	case strings.Contains(ref, "#"):
		owner, name := domain.SplitName(ref, u.Name)
		ep, err = s.Store.EndpointByName(ctx, owner, name)
	default:
		if ep, err = s.Store.Endpoint(ctx, ref); domain.IsNotFound(err) {
			ep, err = s.Store.EndpointByName(ctx, u.Name, ref)
		}
	}
	if domain.IsNotFound(err) || err == nil && !ep.UsableBy(u.ID) {
		return domain.Endpoint{}, domain.Errorf(domain.ENotFound, "no %s %q", role, ref)
	}
	return ep, err
}

// ownEndpoint is visibleEndpoint for a change, which only the owner may
// make.
func (s *Service) ownEndpoint(ctx context.Context, u domain.User, ref string) (domain.Endpoint, error) {
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err == nil && ep.OwnerID != u.ID {
		err = domain.Errorf(domain.EForbidden, "endpoint %s belongs to %s", ep.DisplayName(), ep.Owner)
	}
	return ep, err
}

// view is ep as u sees it.
func (s *Service) view(ctx context.Context, u domain.User, ep domain.Endpoint) (domain.EndpointView, error) {
	activated, expiresIn, err := s.activation(ctx, u, ep)
	v := domain.EndpointView{Endpoint: ep, Activated: activated, ExpiresIn: expiresIn, Addrs: make([]domain.ServerSpec, len(ep.Servers))}
	if ep.Auth == domain.AuthConnect && s.Agents != nil {
		actx, cancel := context.WithCancel(ctx)
		_, v.Connected = s.Agents.Online(actx, ep.ID)
		cancel() // only whether it is connected now
	}
	for i, uri := range ep.Servers {
		v.Addrs[i] = serverAddr(uri)
	}
	return v, err
}

// serverAddr gives the parts of a server URL the store holds
// (ftp://host:port).
func serverAddr(uri string) domain.ServerSpec {
	d := domain.ServerSpec{URI: uri}
	if u, err := gridftp.Parse(uri); err == nil {
		d.Scheme, d.Host = u.Scheme, u.Host
		d.Port, _ = strconv.Atoi(u.Port)
	}
	return d
}

// serverURI checks a server of a request and writes it as the store keeps
// it: ftp://host:port, or gsiftp://host:port for a GSI server. Its
// messages name the server as the request gave it.
func serverURI(sv domain.ServerSpec) (string, error) {
	const want = "want ftp://host:port or gsiftp://host:port"
	named := cmp.Or(sv.URI, sv.Host)
	u := gridftp.URL{Scheme: cmp.Or(sv.Scheme, gridftp.FTP), Host: sv.Host, Port: strconv.Itoa(sv.Port)}
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
func (s *Service) checkServers(ctx context.Context, servers []string) error {
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
func applySpec(ep *domain.Endpoint, spec domain.EndpointSpec) error {
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
	if spec.DefaultDir != nil {
		d, err := domain.CleanPath(*spec.DefaultDir, "/")
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
func (s *Service) applyVia(ctx context.Context, u domain.User, ep *domain.Endpoint, spec domain.EndpointSpec) error {
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
	via, err := s.visibleEndpoint(ctx, u, "head node (via) endpoint", *spec.Via)
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
		if err := s.notRelay(ctx, *ep, "be reached through a head node"); err != nil {
			return err
		}
	}
	ep.Via, ep.ViaName = via.ID, via.DisplayName()
	return nil
}

// notRelay refuses to let ep, the relay of other endpoints, do what.
func (s *Service) notRelay(ctx context.Context, ep domain.Endpoint, what string) error {
	behind, err := s.Store.EndpointsVia(ctx, ep.ID)
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

// FindEndpoint finds an endpoint u may see.
func (s *Service) FindEndpoint(ctx context.Context, u domain.User, ref string) (domain.EndpointView, error) {
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err != nil {
		return domain.EndpointView{}, err
	}
	return s.view(ctx, u, ep)
}

// SearchEndpoints finds the endpoints u may see whose names hold text
// (mine: u's own only), a page of them and how many there are.
func (s *Service) SearchEndpoints(ctx context.Context, u domain.User, text string, mine bool, p domain.Page) ([]domain.EndpointView, int, error) {
	eps, total, err := s.Store.Endpoints(ctx, u.ID, text, mine, p)
	if err != nil {
		return nil, 0, err
	}
	out := make([]domain.EndpointView, len(eps))
	for i, ep := range eps {
		if out[i], err = s.view(ctx, u, ep); err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

// CreateEndpoint makes an endpoint of u's as spec says.
func (s *Service) CreateEndpoint(ctx context.Context, u domain.User, spec domain.EndpointSpec) (domain.EndpointView, error) {
	connect := spec.AuthMethod != nil && *spec.AuthMethod == domain.AuthConnect
	if spec.Name == nil || spec.Servers == nil && !connect {
		return domain.EndpointView{}, domain.Errorf(domain.EInvalid, "an endpoint needs a name and its servers")
	}
	ep := domain.Endpoint{OwnerID: u.ID, Owner: u.Name, Auth: domain.AuthAnonymous, DefaultDir: "/"}
	if connect {
		ep.Auth = domain.AuthConnect
	}
	if err := applySpec(&ep, spec); err != nil {
		return domain.EndpointView{}, err
	}
	if spec.AuthMethod == nil && len(ep.Servers) > 0 && gsiServer(ep.Servers[0]) {
		ep.Auth = domain.AuthGSI // gsiftp:// servers take grid credentials
	}
	if err := s.applyVia(ctx, u, &ep, spec); err != nil {
		return domain.EndpointView{}, err
	}
	if err := checkGSI(ep); err != nil {
		return domain.EndpointView{}, err
	}
	if connect {
		return s.createConnectEndpoint(ctx, u, ep)
	}
	if err := s.checkServers(ctx, ep.Servers); err != nil {
		return domain.EndpointView{}, err
	}
	if err := s.checkMyProxyHost(ctx, ep.MyProxyServer); err != nil {
		return domain.EndpointView{}, err
	}
	if s.refusesAnonymous(ctx, ep) {
		return domain.EndpointView{}, domain.Errorf(domain.EInvalid,
			"endpoint %s: its server refused the anonymous login: add it with --auth password, then ferry endpoint activate %s",
			ep.DisplayName(), ep.DisplayName())
	}
	if err := s.Store.CreateEndpoint(ctx, &ep); err != nil {
		return domain.EndpointView{}, err
	}
	return s.view(ctx, u, ep)
}

// UpdateEndpoint changes an endpoint of u's as spec says.
func (s *Service) UpdateEndpoint(ctx context.Context, u domain.User, ref string, spec domain.EndpointSpec) (domain.EndpointView, error) {
	ep, err := s.ownEndpoint(ctx, u, ref)
	if err != nil {
		return domain.EndpointView{}, err
	}
	if err := applySpec(&ep, spec); err != nil {
		return domain.EndpointView{}, err
	}
	if err := s.applyVia(ctx, u, &ep, spec); err != nil {
		return domain.EndpointView{}, err
	}
	if err := checkGSI(ep); err != nil {
		return domain.EndpointView{}, err
	}
	if spec.Servers != nil {
		if err := s.checkServers(ctx, ep.Servers); err != nil {
			return domain.EndpointView{}, err
		}
	}
	if spec.MyProxyServer != nil {
		if err := s.checkMyProxyHost(ctx, ep.MyProxyServer); err != nil {
			return domain.EndpointView{}, err
		}
	}
	if err := s.Store.UpdateEndpoint(ctx, ep); err != nil {
		return domain.EndpointView{}, err
	}
	return s.view(ctx, u, ep)
}

// DeleteEndpoint deletes an endpoint of u's that is no head node.
func (s *Service) DeleteEndpoint(ctx context.Context, u domain.User, ref string) (domain.Endpoint, error) {
	ep, err := s.ownEndpoint(ctx, u, ref)
	if err != nil {
		return ep, err
	}
	if err := s.notRelay(ctx, ep, "be deleted"); err != nil {
		return ep, err
	}
	if err := s.Store.DeleteEndpoint(ctx, ep.ID); err != nil {
		return ep, err
	}
	s.revoked(ep)
	return ep, nil
}

// fileOp finds the endpoint of a file operation (what) and u's login for
// it. An endpoint behind a relay is refused: the service cannot reach it.
func (s *Service) fileOp(ctx context.Context, u domain.User, ref, what string) (domain.Endpoint, domain.Login, error) {
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err != nil {
		return ep, domain.Login{}, err
	}
	if ep.Via != "" {
		return ep, domain.Login{}, ep.ViaError(what)
	}
	l, err := s.endpointLogin(ctx, u, ep)
	return ep, l, err
}

// endpointLogin is the credential u's file operations on ep use.
func (s *Service) endpointLogin(ctx context.Context, u domain.User, ep domain.Endpoint) (domain.Login, error) {
	l, _, err := s.Box.Login(ctx, s.Store, u.ID, ep, s.now())
	if ie, ok := errors.AsType[*secret.InactiveError](err); ok {
		return l, domain.Errorf(domain.ENotActivated, "%s", ie.Message)
	}
	return l, err
}

// refusesAnonymous reports an anonymous endpoint (reached directly)
// whose server refuses an anonymous login, asked within CheckWithin: a
// server that does not answer in time is not held against it.
func (s *Service) refusesAnonymous(ctx context.Context, ep domain.Endpoint) bool {
	within := s.checkWithin()
	if ep.Auth != domain.AuthAnonymous || ep.Via != "" || within < 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return domain.ErrorCode(s.Ops.Check(ctx, ep, domain.Login{})) == domain.EUnauthorized
}

// anonymousRefused is the error of an anonymous endpoint whose server
// refused the anonymous login: it wants a user, and says how to give one.
func anonymousRefused(ep domain.Endpoint) error {
	n := ep.DisplayName()
	return domain.Errorf(domain.EInvalid, "endpoint %s: its server refused the anonymous login: run ferry endpoint update %s --auth password, then ferry endpoint activate %s", n, n, n)
}

// opsError words a file operation's error for the user: a rejected
// anonymous login means the server wants a user; a rejected stored one,
// that the endpoint needs activating again.
func opsError(ep domain.Endpoint, err error) error {
	if domain.ErrorCode(err) == domain.EUnauthorized && ep.Auth == domain.AuthAnonymous {
		return anonymousRefused(ep)
	}
	if domain.ErrorCode(err) == domain.EUnauthorized {
		return domain.Errorf(domain.ENotActivated, "endpoint %s refused the activation's login: activate it again", ep.DisplayName())
	}
	return err
}

// ServerStates probes each of the endpoint's servers with u's login: up
// or not, its stripes, a ferry front end's movers.
func (s *Service) ServerStates(ctx context.Context, u domain.User, ref string) ([]domain.ServerState, error) {
	ep, l, err := s.fileOp(ctx, u, ref, "probe its servers")
	if err != nil {
		return nil, err
	}
	states, err := s.Ops.ServerStates(ctx, ep, l)
	return states, opsError(ep, err)
}

// opPath cleans a required path of a file operation.
func opPath(field, p string) (string, error) {
	if p == "" {
		return "", domain.Errorf(domain.EInvalid, "%s is required", field)
	}
	return domain.CleanPath(p, "")
}

// Mkdir makes the directory p on the endpoint.
func (s *Service) Mkdir(ctx context.Context, u domain.User, ref, p string) (string, error) {
	p, err := opPath("path", p)
	if err != nil {
		return "", err
	}
	ep, l, err := s.fileOp(ctx, u, ref, "make a directory")
	if err != nil {
		return "", err
	}
	return p, opsError(ep, s.Ops.Mkdir(ctx, ep, l, p))
}

// Rename renames from to to on the endpoint.
func (s *Service) Rename(ctx context.Context, u domain.User, ref, from, to string, overwrite bool) (string, string, error) {
	from, err := opPath("old_path", from)
	if err != nil {
		return "", "", err
	}
	if to, err = opPath("new_path", to); err != nil {
		return "", "", err
	}
	ep, l, err := s.fileOp(ctx, u, ref, "rename")
	if err != nil {
		return "", "", err
	}
	return from, to, opsError(ep, s.Ops.Rename(ctx, ep, l, from, to, overwrite))
}

// List answers a page of a directory's listing, sorted by name or, with
// req.Unsorted, in the order the endpoint lists it: the first page lists
// the directory on its endpoint, later ones read that listing (see
// listings); an unsorted page waits only for its own entries.
func (s *Service) List(ctx context.Context, u domain.User, ref string, req domain.ListRequest) (domain.Listing, error) {
	ep, l, err := s.fileOp(ctx, u, ref, "list")
	if err != nil {
		return domain.Listing{}, err
	}
	p, err := domain.CleanPath(req.Path, ep.DefaultDir)
	if err != nil {
		return domain.Listing{}, err
	}
	page := req.Page.Normal()
	unsorted := "sorted"
	if req.Unsorted {
		unsorted = "unsorted"
	}
	key := strings.Join([]string{strconv.FormatInt(u.ID, 10), ep.ID, l.User, p, req.Filter, unsorted}, "\x00")
	list := func(ctx context.Context, fn func(domain.FileInfo) error) error {
		return s.Ops.List(ctx, ep, l, p, func(f domain.FileInfo) error {
			if req.Keep != nil && !req.Keep(f.Name, f.Type) {
				return nil
			}
			return fn(f)
		})
	}
	lst, err := s.listings.get(key, page.Offset == 0, s.now(), func() (*listing, error) {
		if req.Unsorted {
			return s.listings.streamListing(ctx, list, s.now())
		}
		return makeListing(func(fn func(domain.FileInfo) error) error { return list(ctx, fn) }, listingRun, s.now())
	})
	if err != nil {
		return domain.Listing{}, opsError(ep, err)
	}
	defer s.listings.release(lst)
	shown, total, err := lst.page(ctx, page.Offset, page.Limit)
	if err != nil {
		return domain.Listing{}, opsError(ep, err)
	}
	return domain.Listing{Endpoint: ep, Path: p, Page: page, Files: shown, Total: total}, nil
}
