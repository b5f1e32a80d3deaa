package core

import (
	"context"
	"crypto/rand"
	"slices"
	"time"

	"ferry/service/domain"
)

// newKey makes the secret of a new setup key, and says until when it is
// valid; EUnavailable without a relay, where no agent could use it.
func (s *Service) newKey() (secret string, expires time.Time, err error) {
	if s.CAPin == "" {
		return "", time.Time{}, domain.Errorf(domain.EUnavailable, "this service runs no relay for connect endpoints")
	}
	return rand.Text(), s.now().Add(domain.SetupKeyLifetime), nil
}

// setupKey is the setup key of endpointID with secret.
func (s *Service) setupKey(endpointID, secret string, expires time.Time) domain.SetupKey {
	return domain.SetupKey{EndpointID: endpointID, Key: domain.JoinSetupKey(secret, s.CAPin), Expires: expires}
}

// createConnectEndpoint stores a new connect endpoint with its first
// setup key, both or neither, and returns both.
func (s *Service) createConnectEndpoint(ctx context.Context, u domain.User, ep domain.Endpoint) (domain.EndpointView, error) {
	secret, expires, err := s.newKey()
	if err != nil {
		return domain.EndpointView{}, err
	}
	if err := s.Store.CreateConnectEndpoint(ctx, &ep, domain.SetupKeyHash(secret), expires); err != nil {
		return domain.EndpointView{}, err
	}
	v, err := s.view(ctx, u, ep)
	if err != nil {
		return v, err
	}
	k := s.setupKey(ep.ID, secret, expires)
	v.SetupKey = &k
	return v, nil
}

// NewSetupKey gives one of u's connect endpoints a new one-time setup
// key, which revokes the certificates of its earlier agents. Only the
// hash of the key's secret is stored.
func (s *Service) NewSetupKey(ctx context.Context, u domain.User, ref string) (domain.SetupKey, error) {
	ep, err := s.ownEndpoint(ctx, u, ref)
	if err != nil {
		return domain.SetupKey{}, err
	}
	if ep.Auth != domain.AuthConnect {
		return domain.SetupKey{}, domain.Errorf(domain.EInvalid, "endpoint %s is not a connect endpoint", ep.DisplayName())
	}
	secret, expires, err := s.newKey()
	if err != nil {
		return domain.SetupKey{}, err
	}
	if _, err := s.Store.NewSetupKey(ctx, ep.ID, domain.SetupKeyHash(secret), expires); err != nil {
		return domain.SetupKey{}, err
	}
	s.revoked(ep)
	return s.setupKey(ep.ID, secret, expires), nil
}

// revoked tells the relay that ep's agent certificates are revoked.
func (s *Service) revoked(ep domain.Endpoint) {
	if ep.Auth == domain.AuthConnect && s.Revoked != nil {
		s.Revoked(ep.ID)
	}
}

// Relays lists where agents reach the service's relays: self first,
// then the other live processes'.
func (s *Service) Relays(ctx context.Context, self string) ([]string, error) {
	ps, err := s.Store.Processes(ctx, s.now())
	if err != nil {
		return nil, err
	}
	urls := []string{self}
	for _, p := range ps {
		if !slices.Contains(urls, p.RelayURL) {
			urls = append(urls, p.RelayURL)
		}
	}
	return urls, nil
}
