package core

import (
	"context"
	"fmt"
	"time"

	"ferry/gsi"
	"ferry/service/domain"
	"ferry/service/secret"
)

// activation reports whether u has a usable activation for ep and for
// how many seconds (-1: it needs none).
func (s *Service) activation(ctx context.Context, u domain.User, ep domain.Endpoint) (bool, int64, error) {
	if !ep.NeedsActivation() {
		return true, -1, nil
	}
	a, err := s.Store.Activation(ctx, u.ID, ep.ID)
	now := s.now()
	if domain.IsNotFound(err) || err == nil && a.Expired(now) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	// Rounded up: an activation is never shown with 0 seconds left.
	return true, int64((a.Expires.Sub(now) + time.Second - 1) / time.Second), nil
}

// ActivationStatus says whether u's activation of the endpoint is usable,
// for how long, and as whom.
func (s *Service) ActivationStatus(ctx context.Context, u domain.User, ref string) (domain.ActivationStatus, error) {
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err != nil {
		return domain.ActivationStatus{}, err
	}
	st := domain.ActivationStatus{Endpoint: ep, Requirements: requirements(ep)}
	if st.Activated, st.ExpiresIn, err = s.activation(ctx, u, ep); err != nil {
		return st, err
	}
	if st.Activated && ep.NeedsActivation() {
		if a, err := s.Store.Activation(ctx, u.ID, ep.ID); err == nil {
			st.Subject = a.Subject
		}
	}
	return st, nil
}

// requirements is what an activation of ep takes: a login (user name
// and password); a grid proxy, or with a MyProxy server a MyProxy username
// and pass phrase instead; nothing for an anonymous endpoint.
func requirements(ep domain.Endpoint) []domain.ActivationRequirement {
	switch {
	case ep.Auth == domain.AuthGSI:
		rs := []domain.ActivationRequirement{
			{Type: "proxy", Name: "proxy", UIName: "Grid proxy",
				Description: "a grid proxy in PEM (certificate, key, chain), as grid-proxy-init or myproxy-logon writes it; " +
					"the activation lasts as long as the proxy", Required: true, Private: true},
			{Type: "proxy", Name: "username", UIName: "Username",
				Description: "the user to log in as on the endpoint's servers (default: their grid-mapfile's mapping of the proxy's identity)"},
		}
		if ep.MyProxyServer != "" {
			// Either a proxy, or a MyProxy username and pass phrase.
			rs[0].Required = false
			rs[0].Description += "; or give your MyProxy username and pass phrase instead"
			rs = append(rs,
				domain.ActivationRequirement{Type: "myproxy", Name: "myproxy_username", UIName: "MyProxy username",
					Description: fmt.Sprintf("your username on the MyProxy server %s, which gives the service a proxy of yours "+
						"(instead of proxy); it activates every endpoint that names that server", ep.MyProxyServer)},
				domain.ActivationRequirement{Type: "myproxy", Name: "myproxy_passphrase", UIName: "MyProxy pass phrase",
					Description: "the pass phrase of your credential on the MyProxy server: used once, never stored", Private: true})
		}
		return rs
	case ep.NeedsActivation():
		return []domain.ActivationRequirement{
			{Type: "password", Name: "username", UIName: "Username",
				Description: "your user name on the endpoint's servers", Required: true},
			{Type: "password", Name: "password", UIName: "Password",
				Description: "your password on the endpoint's servers", Required: true, Private: true},
		}
	}
	return nil
}

// Activate checks a login by logging in to the endpoint, keeps it sealed
// until it expires, and resumes u's tasks that waited for it.
func (s *Service) Activate(ctx context.Context, u domain.User, ref string, req domain.ActivateRequest) (domain.ActivateResult, error) {
	var res domain.ActivateResult
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err != nil {
		return res, err
	}
	if !ep.NeedsActivation() {
		if s.refusesAnonymous(ctx, ep) {
			return res, anonymousRefused(ep)
		}
		res.Code, res.Message, res.ExpiresIn = "AlreadyActivated", fmt.Sprintf("endpoint %s needs no activation", ep.DisplayName()), -1
		return res, nil
	}
	lifetime := domain.DefaultActivationLifetime
	if req.Lifetime < 0 || time.Duration(req.Lifetime) > maxActivationLifetime/time.Second {
		return res, domain.Errorf(domain.EInvalid, "lifetime %d: want 1 to %d seconds", req.Lifetime, int64(maxActivationLifetime/time.Second))
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
		pem, err := s.myproxyLogin(ctx, ep, req, asked)
		if err != nil {
			return res, err
		}
		req = domain.ActivateRequest{Username: req.Username, Proxy: pem, Lifetime: req.Lifetime}
	}
	now := s.now()
	expires := now.Add(lifetime)
	var l domain.Login
	var subject string
	if ep.Auth == domain.AuthGSI {
		var err error
		if l, subject, expires, err = gsiLogin(ep, req, now); err != nil {
			if viaMyProxy {
				return res, domain.Errorf(domain.ErrorCode(err), "the proxy from MyProxy server %s: %s", ep.MyProxyServer, domain.ErrorMessage(err))
			}
			return res, err
		}
		if req.Lifetime > 0 && now.Add(lifetime).Before(expires) {
			expires = now.Add(lifetime)
		}
	} else {
		if viaMyProxy {
			// myproxyLogin refused it already.
			return res, domain.Errorf(domain.EInvalid, "a MyProxy username: endpoint %s is not a %s endpoint", ep.DisplayName(), domain.AuthGSI)
		}
		if req.Proxy != "" {
			return res, domain.Errorf(domain.EInvalid, "proxy: endpoint %s is a %s endpoint; a grid proxy activates %s endpoints only",
				ep.DisplayName(), ep.Auth, domain.AuthGSI)
		}
		if req.Username == "" || req.Password == "" {
			return res, domain.Errorf(domain.EInvalid, "username and password are required")
		}
		l = domain.Login{User: req.Username, Password: req.Password}
	}
	if ep.Via != "" {
		// The service cannot reach it to log in: a wrong login fails
		// the transfers to it, as the head node's forwarding reports.
	} else if err := s.Ops.Check(ctx, ep, l); domain.ErrorCode(err) == domain.EUnauthorized {
		who := fmt.Sprintf("%q", req.Username)
		if subject != "" {
			who = fmt.Sprintf("the grid proxy of %q", subject)
		}
		if viaMyProxy {
			who = fmt.Sprintf("the grid proxy of %q from MyProxy server %s", subject, ep.MyProxyServer)
		}
		return res, domain.Errorf(domain.EInvalid, "endpoint %s refused the login of %s: %s", ep.DisplayName(), who, domain.ErrorMessage(err))
	} else if err != nil {
		return res, err
	}
	sealed, err := s.Box.Seal(l, secret.Context(u.ID, ep.ID))
	if err != nil {
		return res, err
	}
	a := domain.Activation{UserID: u.ID, EndpointID: ep.ID, Sealed: sealed, Expires: expires, Created: now, Subject: subject}
	if err := s.Store.PutActivation(ctx, a); err != nil {
		return res, err
	}
	if res.Resumed, err = s.Store.Reactivate(ctx, u.ID, ep.ID, now); err != nil {
		return res, err
	}
	var shared []domain.ActivatedEndpoint
	if viaMyProxy {
		res.Endpoints = []domain.ActivatedEndpoint{{ID: ep.ID, DisplayName: ep.DisplayName(),
			ExpiresIn: int64(expires.Sub(now) / time.Second), Resumed: res.Resumed}}
		var n int
		shared, n, err = s.shareActivation(ctx, u, ep, l, a)
		res.Endpoints, res.Resumed = append(res.Endpoints, shared...), res.Resumed+n
		if err != nil {
			if res.Resumed > 0 {
				s.queued()
			}
			return res, err
		}
	}
	if res.Resumed > 0 {
		s.queued()
	}
	res.Code, res.ExpiresIn, res.Subject = "Activated", int64(expires.Sub(now)/time.Second), subject
	res.Message = fmt.Sprintf("endpoint %s is activated until %s", ep.DisplayName(), a.Expires.UTC().Format(time.RFC3339))
	if subject != "" {
		res.Message = fmt.Sprintf("endpoint %s is activated as %s until %s", ep.DisplayName(), subject, a.Expires.UTC().Format(time.RFC3339))
	}
	if viaMyProxy {
		res.Message += fmt.Sprintf(" with a proxy from MyProxy server %s", ep.MyProxyServer)
		switch {
		case len(shared) == 1:
			res.Message += fmt.Sprintf("; so is %s, which names the same MyProxy server", sharedNames(shared))
		case len(shared) > 1:
			res.Message += fmt.Sprintf("; so are %s, which name the same MyProxy server", sharedNames(shared))
		}
	}
	if ep.Via != "" {
		res.Message += fmt.Sprintf("; the login is not checked: the service reaches the endpoint only through %s", ep.ViaName)
	}
	return res, nil
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
func gsiLogin(ep domain.Endpoint, req domain.ActivateRequest, now time.Time) (domain.Login, string, time.Time, error) {
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

// Deactivate forgets u's activation and pauses its tasks on the endpoint.
func (s *Service) Deactivate(ctx context.Context, u domain.User, ref string) (domain.Endpoint, int, error) {
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", ref)
	if err != nil {
		return ep, 0, err
	}
	if !ep.NeedsActivation() {
		return ep, 0, domain.Errorf(domain.EInvalid, "endpoint %s needs no activation", ep.DisplayName())
	}
	if err := s.Store.DeleteActivation(ctx, u.ID, ep.ID); err != nil && !domain.IsNotFound(err) {
		return ep, 0, err
	}
	n, err := s.Store.Deactivate(ctx, u.ID, ep.ID, domain.NiceNotActivated, s.now())
	return ep, n, err
}
