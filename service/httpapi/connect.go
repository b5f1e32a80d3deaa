package httpapi

import (
	"crypto/rand"
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

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
	if s.CAPin == "" {
		return domain.Errorf(domain.EUnavailable, "this service runs no relay for connect endpoints (ferry server --relay-listen)")
	}
	secret, expires := rand.Text(), s.Now().Add(domain.SetupKeyLifetime)
	if _, err := s.Store.NewSetupKey(r.Context(), ep.ID, domain.SetupKeyHash(secret), expires); err != nil {
		return err
	}
	s.revoked(ep)
	return reply(w, http.StatusCreated, api.SetupKey{DataType: "setup_key", EndpointID: ep.ID,
		SetupKey: domain.JoinSetupKey(secret, s.CAPin), Expires: expires})
}

// revoked tells the relay that ep's agent certificates are revoked.
func (s *Server) revoked(ep domain.Endpoint) {
	if ep.Auth == domain.AuthConnect && s.Revoked != nil {
		s.Revoked(ep.ID)
	}
}

// relay tells agents where the relay listens.
func (s *Server) relay(w http.ResponseWriter, _ *http.Request, _ *call) error {
	if s.RelayAddr == "" {
		return domain.Errorf(domain.ENotFound, "this service runs no relay for connect endpoints")
	}
	return reply(w, http.StatusOK, api.Relay{DataType: "relay", Address: s.RelayAddr})
}
