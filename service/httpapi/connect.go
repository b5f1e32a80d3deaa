package httpapi

import (
	"crypto/rand"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"ferry/connect/tunnel"
	"ferry/service/api"
	"ferry/service/domain"
)

// newKey makes the secret of a new setup key, and says until when it is
// valid; EUnavailable without a relay, where no agent could use it.
func (s *Server) newKey() (secret string, expires time.Time, err error) {
	if s.CAPin == "" {
		return "", time.Time{}, domain.Errorf(domain.EUnavailable, "this service runs no relay for connect endpoints")
	}
	return rand.Text(), s.Now().Add(domain.SetupKeyLifetime), nil
}

// keyDoc is the document of a setup key with secret.
func (s *Server) keyDoc(endpointID, secret string, expires time.Time) *api.SetupKey {
	return &api.SetupKey{DataType: "setup_key", EndpointID: endpointID,
		SetupKey: domain.JoinSetupKey(secret, s.CAPin), Expires: expires}
}

// createConnectEndpoint stores a new connect endpoint with its first
// setup key, both or neither, and answers with both.
func (s *Server) createConnectEndpoint(w http.ResponseWriter, r *http.Request, c *call, ep domain.Endpoint) error {
	secret, expires, err := s.newKey()
	if err != nil {
		return err
	}
	if err := s.Store.CreateConnectEndpoint(r.Context(), &ep, domain.SetupKeyHash(secret), expires); err != nil {
		return err
	}
	d, err := s.endpointDoc(r, c, ep)
	if err != nil {
		return err
	}
	d.SetupKey = s.keyDoc(ep.ID, secret, expires)
	return reply(w, http.StatusCreated, d)
}

// setupKey gives one of the caller's connect endpoints a new one-time
// setup key, which revokes the certificates of its earlier agents. Only
// the hash of the key's secret is stored.
func (s *Server) setupKey(w http.ResponseWriter, r *http.Request, c *call) error {
	ep, err := s.ownEndpoint(r, c)
	if err != nil {
		return err
	}
	if ep.Auth != domain.AuthConnect {
		return domain.Errorf(domain.EInvalid, "endpoint %s is not a connect endpoint", ep.DisplayName())
	}
	secret, expires, err := s.newKey()
	if err != nil {
		return err
	}
	if _, err := s.Store.NewSetupKey(r.Context(), ep.ID, domain.SetupKeyHash(secret), expires); err != nil {
		return err
	}
	s.revoked(ep)
	return reply(w, http.StatusCreated, s.keyDoc(ep.ID, secret, expires))
}

// revoked tells the relay that ep's agent certificates are revoked.
func (s *Server) revoked(ep domain.Endpoint) {
	if ep.Auth == domain.AuthConnect && s.Revoked != nil {
		s.Revoked(ep.ID)
	}
}

// relay hands a connection that asks for an upgrade to the relay, and
// else tells agents where the service's relays are: this process's first.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, _ *call) error {
	if s.RelayURL == "" {
		return domain.Errorf(domain.ENotFound, "this service runs no relay for connect endpoints")
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), tunnel.Upgrade) {
		return s.upgrade(w)
	}
	ps, err := s.Store.Processes(r.Context(), s.Now())
	if err != nil {
		return err
	}
	urls := []string{s.RelayURL}
	for _, p := range ps {
		if !slices.Contains(urls, p.RelayURL) {
			urls = append(urls, p.RelayURL)
		}
	}
	return reply(w, http.StatusOK, api.Relay{DataType: "relay", Relays: urls})
}

// upgrade takes the connection from the HTTP server and hands it to the
// relay.
func (s *Server) upgrade(w http.ResponseWriter) error {
	if s.RelayConn == nil {
		return domain.Errorf(domain.ENotFound, "this process's relay is not on the API's port")
	}
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	c.SetDeadline(time.Time{}) // a body's deadline (serve) is not the relay's
	if _, err := io.WriteString(c, tunnel.UpgradeReply); err != nil {
		c.Close()
		return nil
	}
	if n := rw.Reader.Buffered(); n > 0 { // sent before the answer
		head, _ := rw.Reader.Peek(n)
		c = tunnel.Prefixed(c, slices.Clone(head))
	}
	go s.RelayConn(c)
	return nil
}
