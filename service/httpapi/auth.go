package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"ferry/service/api"
	"ferry/service/domain"
)

// SessionCookie is the name of the web session cookie.
const SessionCookie = "ferry_session"

// CSRFToken is the token that unsafe requests authenticated by the
// session cookie whose value is session must carry in X-CSRF-Token. Only
// someone who can read the cookie can compute it, which a cross-site page
// cannot.
func CSRFToken(session string) string {
	h := sha256.Sum256([]byte("ferry csrf\x00" + session))
	return hex.EncodeToString(h[:])
}

// authenticate finds the caller from a bearer token or the session cookie.
func (s *Server) authenticate(r *http.Request, c *call) error {
	kind, secret := domain.TokenAPI, ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, value, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(value) == "" {
			return domain.Errorf(domain.EUnauthorized, "Authorization header: want Bearer TOKEN")
		}
		secret = strings.TrimSpace(value)
	} else if ck, err := r.Cookie(SessionCookie); err == nil && ck.Value != "" {
		kind, secret = domain.TokenSession, ck.Value
	} else {
		return domain.Errorf(domain.EUnauthorized, "not logged in: send Authorization: Bearer TOKEN (from ferry login)")
	}
	u, t, err := s.Auth.Authenticate(r.Context(), kind, secret, func(domain.Token) error {
		if kind == domain.TokenSession && !safeMethod(r.Method) &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(CSRFToken(secret))) != 1 {
			return domain.Errorf(domain.EForbidden, "missing or wrong X-CSRF-Token for this session")
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.user, c.token, c.secret = u, t, secret
	return nil
}

func safeMethod(m string) bool { return m == "GET" || m == "HEAD" || m == "OPTIONS" }

// sameOrigin refuses a browser's request from a page of another origin
// than the service's: the Host it was sent to, or PublicURL's. Requests
// without an Origin come from programs (the CLI), not from pages.
func (s *Server) sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if u, err := url.Parse(o); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		if strings.EqualFold(u.Host, r.Host) {
			return nil
		}
		if p, err := url.Parse(s.PublicURL); err == nil && s.PublicURL != "" && strings.EqualFold(u.Scheme+"://"+u.Host, p.Scheme+"://"+p.Host) {
			return nil
		}
	}
	return domain.Errorf(domain.EForbidden, "Origin %q: log in from the service's own pages", o)
}

// login checks a user's password and makes an API token or web session.
// Guesses are throttled (LoginLimits), and a page of another site cannot
// log its visitor in (sameOrigin, and a JSON body that forms cannot send).
func (s *Server) login(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.sameOrigin(r); err != nil {
		return err
	}
	var req api.Login
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "login"); err != nil {
		return err
	}
	res, err := s.Auth.Login(r.Context(), domain.LoginRequest{Username: req.Username, Password: req.Password, Remote: r.RemoteAddr,
		Kind: req.Kind, Name: req.Name, Lifetime: req.Lifetime})
	if res.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(res.RetryAfter, 10))
	}
	if err != nil {
		return err
	}
	c.user = res.User
	secret, t := res.Secret, res.Token
	kind := t.Kind
	doc := tokenDoc(t)
	if kind == domain.TokenSession {
		cookie := s.sessionCookie(r, secret)
		cookie.Expires = t.Expires
		http.SetCookie(w, cookie)
		doc.CSRFToken = CSRFToken(secret)
	} else {
		doc.Value = secret
	}
	return reply(w, http.StatusCreated, doc)
}

// sessionCookie is the web session cookie carrying value: Secure when
// the request came over TLS or users reach the service over https
// (PublicURL, behind a proxy that ends TLS), so that a browser never
// sends it over plain http.
func (s *Server) sessionCookie(r *http.Request, value string) *http.Cookie {
	public, err := url.Parse(s.PublicURL)
	https := err == nil && strings.EqualFold(public.Scheme, "https")
	return &http.Cookie{Name: SessionCookie, Value: value, Path: "/", HttpOnly: true, Secure: r.TLS != nil || https, SameSite: http.SameSiteStrictMode}
}

// logout revokes the credential of the request and drops the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.Auth.RevokeToken(r.Context(), c.user, c.token.ID); err != nil {
		return err
	}
	if c.token.Kind == domain.TokenSession {
		cookie := s.sessionCookie(r, "")
		cookie.MaxAge = -1
		http.SetCookie(w, cookie)
	}
	return result(w, r, "result", "LoggedOut", "the token is revoked")
}

// session describes the caller's credential; for a web session it gives
// the CSRF token again, which a reloaded page cannot compute from its
// HttpOnly cookie.
func (s *Server) session(w http.ResponseWriter, r *http.Request, c *call) error {
	doc := api.Session{DataType: "session", Username: c.user.Name, Kind: c.token.Kind, Expires: c.token.Expires}
	if c.token.Kind == domain.TokenSession {
		doc.CSRFToken = CSRFToken(c.secret)
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) tokens(w http.ResponseWriter, r *http.Request, c *call) error {
	ts, err := s.Auth.Tokens(r.Context(), c.user)
	if err != nil {
		return err
	}
	doc := api.TokenList{DataType: "token_list", Data: make([]api.Token, len(ts))}
	for i, t := range ts {
		doc.Data[i] = tokenDoc(t)
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Errorf(domain.ENotFound, "no token %q", r.PathValue("id"))
	}
	if err := s.Auth.RevokeToken(r.Context(), c.user, id); err != nil {
		return err
	}
	return result(w, r, "result", "Revoked", "the token is revoked")
}

func (s *Server) sshKeys(w http.ResponseWriter, r *http.Request, c *call) error {
	ks, err := s.Users.SSHKeys(r.Context(), c.user)
	if err != nil {
		return err
	}
	doc := api.SSHKeyList{DataType: "ssh_key_list", Data: make([]api.SSHKey, len(ks))}
	for i, k := range ks {
		doc.Data[i] = sshKeyDoc(k)
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) addSSHKey(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.SSHKey
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "ssh_key"); err != nil {
		return err
	}
	k, err := s.Users.AddSSHKey(r.Context(), c.user, req.Key)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, sshKeyDoc(k))
}

func (s *Server) deleteSSHKey(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Errorf(domain.ENotFound, "no SSH key %q", r.PathValue("id"))
	}
	if err := s.Users.DeleteSSHKey(r.Context(), c.user, id); err != nil {
		return err
	}
	return result(w, r, "result", "Deleted", "the SSH key is removed")
}

func sshKeyDoc(k domain.SSHKey) api.SSHKey {
	return api.SSHKey{DataType: "ssh_key", ID: k.ID, Key: k.Line, Fingerprint: k.Fingerprint, Created: k.Created}
}

func tokenDoc(t domain.Token) api.Token {
	return api.Token{
		DataType: "token", ID: t.ID, Kind: t.Kind, Name: t.Name,
		Created: t.Created, Expires: t.Expires, LastUsed: t.LastUsed, Revoked: t.Revoked,
	}
}
