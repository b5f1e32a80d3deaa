package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"ferry/service/domain"
)

var (
	_ domain.AuthService = (*Service)(nil)
	_ domain.UserService = (*Service)(nil)
)

// Token lifetimes.
const (
	apiTokenLifetime = 30 * 24 * time.Hour
	sessionLifetime  = 12 * time.Hour
	maxTokenLifetime = 365 * 24 * time.Hour
	// touchEvery limits how often a token's last use is written.
	touchEvery = time.Minute
)

// hashToken is what the store keeps of a token's secret.
func hashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Authenticate finds the user of a token of kind by its secret.
func (s *Service) Authenticate(ctx context.Context, kind, secret string, check func(domain.Token) error) (domain.User, domain.Token, error) {
	now := s.now()
	t, err := s.Store.TokenByHash(ctx, hashToken(secret))
	if domain.IsNotFound(err) || err == nil && t.Kind != kind {
		return domain.User{}, t, domain.Errorf(domain.EUnauthorized, "unknown token: log in again")
	}
	if err != nil {
		return domain.User{}, t, err
	}
	if !t.Valid(now) {
		return domain.User{}, t, domain.Errorf(domain.EUnauthorized, "token expired or revoked: log in again")
	}
	if check != nil {
		if err := check(t); err != nil {
			return domain.User{}, t, err
		}
	}
	u, err := s.Store.UserByID(ctx, t.UserID)
	if err != nil {
		if domain.IsNotFound(err) {
			return u, t, domain.Errorf(domain.EUnauthorized, "unknown token: log in again")
		}
		return u, t, err
	}
	if now.Sub(t.LastUsed) >= touchEvery {
		if err := s.Store.TouchToken(ctx, t.ID, now); err != nil {
			return u, t, err
		}
	}
	return u, t, nil
}

// checkPassword finds the user name whose password is password.
func (s *Service) checkPassword(ctx context.Context, name, password string) (domain.User, error) {
	u, err := s.Store.UserByName(ctx, name)
	if err != nil && !domain.IsNotFound(err) {
		return u, err
	}
	if !domain.CheckPassword(u.PasswordHash, password) || err != nil {
		return u, domain.Errorf(domain.EUnauthorized, "wrong user name or password")
	}
	return u, nil
}

// Login checks a user's password and makes an API token or web session.
// Guesses are throttled (LoginLimits).
func (s *Service) Login(ctx context.Context, req domain.LoginRequest) (domain.LoginResult, error) {
	var res domain.LoginResult
	kind := req.Kind
	if kind == "" {
		kind = domain.TokenAPI
	}
	lifetime := apiTokenLifetime
	if kind == domain.TokenSession {
		lifetime = sessionLifetime
	} else if kind != domain.TokenAPI {
		return res, domain.Errorf(domain.EInvalid, "kind %q: want api or session", req.Kind)
	}
	if req.Lifetime < 0 || time.Duration(req.Lifetime) > maxTokenLifetime/time.Second {
		return res, domain.Errorf(domain.EInvalid, "lifetime %d: want 1 to %d seconds", req.Lifetime, int64(maxTokenLifetime/time.Second))
	}
	if req.Lifetime > 0 {
		lifetime = time.Duration(req.Lifetime) * time.Second
	}
	if err := checkText("name", req.Name, 128); err != nil {
		return res, err
	}
	l := s.logins()
	keys := l.keys(req.Username, req.Remote)
	if wait := l.t.Try(keys...); wait > 0 {
		res.RetryAfter = int64((wait + time.Second - 1) / time.Second)
		return res, domain.Errorf(domain.EThrottled, "too many failed logins: try again in %d s", res.RetryAfter)
	}
	u, err := s.checkPassword(ctx, req.Username, req.Password)
	switch {
	case err == nil:
		l.t.Succeeded(keys...)
	case domain.ErrorCode(err) != domain.EUnauthorized:
		l.t.Void(keys...) // no answer to the password
	}
	if err != nil {
		return res, err
	}
	res.User = u
	res.Secret, res.Token, err = s.newToken(ctx, u, kind, req.Name, lifetime)
	return res, err
}

// newToken makes and stores a token of user u and returns its secret.
func (s *Service) newToken(ctx context.Context, u domain.User, kind, name string, lifetime time.Duration) (string, domain.Token, error) {
	secret := "ferry_" + rand.Text()
	now := s.now()
	t := domain.Token{UserID: u.ID, Kind: kind, Name: name, Hash: hashToken(secret), Expires: now.Add(lifetime), LastUsed: now}
	return secret, t, s.Store.CreateToken(ctx, &t)
}

// MintToken makes an API token of user u, named name, valid for lifetime,
// for a component of the service that acts as u through the API (the SSH
// gateway, for a session of u): it returns the secret, and revoke, which
// ends the token. The token is listed among u's.
func (s *Service) MintToken(ctx context.Context, u domain.User, name string, lifetime time.Duration) (secret string, revoke func(), err error) {
	secret, t, err := s.newToken(ctx, u, domain.TokenAPI, name, lifetime)
	if err != nil {
		return "", nil, err
	}
	return secret, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.Store.RevokeToken(ctx, u.ID, t.ID); err != nil {
			s.logger().Warn("revoking a minted token", "user", u.Name, "token", t.ID, "err", err)
		}
	}, nil
}

// Tokens lists u's tokens.
func (s *Service) Tokens(ctx context.Context, u domain.User) ([]domain.Token, error) {
	return s.Store.Tokens(ctx, u.ID)
}

// RevokeToken ends one of u's tokens.
func (s *Service) RevokeToken(ctx context.Context, u domain.User, id int64) error {
	return s.Store.RevokeToken(ctx, u.ID, id)
}

// Health checks the store with a cheap lookup.
func (s *Service) Health(ctx context.Context) error {
	if _, err := s.Store.UserByID(ctx, 0); err != nil && !domain.IsNotFound(err) {
		return err
	}
	return nil
}

// AddUser makes an account named name with a password.
func (s *Service) AddUser(ctx context.Context, name, email, password string) (domain.User, error) {
	u := domain.User{Name: name, Email: email}
	if err := domain.ValidName(name); err != nil {
		return u, err
	}
	hash, err := domain.HashPassword(password)
	if err != nil {
		return u, err
	}
	u.PasswordHash = hash
	return u, s.Store.CreateUser(ctx, &u)
}

// UserByName finds a user.
func (s *Service) UserByName(ctx context.Context, name string) (domain.User, error) {
	return s.Store.UserByName(ctx, name)
}

// UserByID finds a user.
func (s *Service) UserByID(ctx context.Context, id int64) (domain.User, error) {
	return s.Store.UserByID(ctx, id)
}

// KeyUser is the user named name if one of their SSH keys has
// fingerprint.
func (s *Service) KeyUser(ctx context.Context, name, fingerprint string) (domain.User, error) {
	unknown := domain.Errorf(domain.EUnauthorized, "unknown user or key")
	u, err := s.Store.UserByName(ctx, name)
	if err != nil {
		return u, unknown
	}
	keys, err := s.Store.SSHKeys(ctx, u.ID)
	if err != nil {
		return u, err
	}
	for _, k := range keys {
		if k.Fingerprint == fingerprint {
			return u, nil
		}
	}
	return u, unknown
}

// Users lists the users.
func (s *Service) Users(ctx context.Context) ([]domain.User, error) { return s.Store.Users(ctx) }

// SetPassword changes u's password.
func (s *Service) SetPassword(ctx context.Context, u domain.User, password string) error {
	hash, err := domain.HashPassword(password)
	if err != nil {
		return err
	}
	return s.Store.SetPassword(ctx, u.ID, hash)
}

// RemoveUser removes u and all that is theirs.
func (s *Service) RemoveUser(ctx context.Context, u domain.User) error {
	return s.Store.RemoveUser(ctx, u.ID)
}

// SSHKeys lists u's SSH keys.
func (s *Service) SSHKeys(ctx context.Context, u domain.User) ([]domain.SSHKey, error) {
	return s.Store.SSHKeys(ctx, u.ID)
}

// AddSSHKey adds a public key of u's.
func (s *Service) AddSSHKey(ctx context.Context, u domain.User, line string) (domain.SSHKey, error) {
	k, err := domain.ParseSSHKey(line)
	if err != nil {
		return k, err
	}
	k.UserID = u.ID
	return k, s.Store.AddSSHKey(ctx, &k)
}

// DeleteSSHKey removes one of u's SSH keys.
func (s *Service) DeleteSSHKey(ctx context.Context, u domain.User, id int64) error {
	return s.Store.DeleteSSHKey(ctx, u.ID, id)
}
