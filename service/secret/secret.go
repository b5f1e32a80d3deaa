// Package secret seals what the service keeps secret in its database —
// endpoint credentials, the connect CA's key — with AES-256-GCM under a
// key kept outside the database.
package secret

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"ferry/service/domain"
)

// KeySize is the length of a key in bytes.
const KeySize = 32

// Box seals and opens logins.
type Box struct{ aead cipher.AEAD }

// New makes a Box from a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret: key is %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Box{aead: g}, nil
}

// LoadOrCreate reads the key file at path, creating it (mode 0600) with a
// random key when it does not exist.
func LoadOrCreate(path string) (*Box, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("secret: create key: %w", err)
		}
		if _, err := f.Write(key); err != nil {
			f.Close()
			return nil, fmt.Errorf("secret: write key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("secret: write key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("secret: read key: %w", err)
	}
	return New(key)
}

// Seal encrypts a login, binding it to context (e.g. user and endpoint
// IDs) so a sealed value cannot be moved to another row.
func (b *Box) Seal(l domain.Login, context string) ([]byte, error) {
	plain, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return b.SealBytes(plain, context)
}

// Open decrypts what Seal made with the same context.
func (b *Box) Open(sealed []byte, context string) (domain.Login, error) {
	var l domain.Login
	plain, err := b.OpenBytes(sealed, context)
	if err != nil {
		return l, err
	}
	err = json.Unmarshal(plain, &l)
	return l, err
}

// SealBytes encrypts plain, binding it to context.
func (b *Box) SealBytes(plain []byte, context string) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plain, []byte(context)), nil
}

// OpenBytes decrypts what SealBytes made with the same context.
func (b *Box) OpenBytes(sealed []byte, context string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, errors.New("secret: sealed value too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(context))
	if err != nil {
		return nil, errors.New("secret: cannot open sealed value (wrong key or context)")
	}
	return plain, nil
}

// Context is the context string binding an activation to its row.
func Context(userID int64, endpointID string) string {
	return fmt.Sprintf("activation:%d:%s", userID, endpointID)
}

// InactiveError says why a user cannot use an endpoint yet: it was never
// activated, its activation expired, or the sealed login cannot be read.
type InactiveError struct {
	Nice    string // domain.NiceNotActivated or domain.NiceCredentialExpired
	Message string // for the user: what happened and what to do
}

func (e *InactiveError) Error() string { return e.Message }

// Login opens userID's activation of ep, valid at now. It returns the
// login (for a gsi endpoint, with its grid proxy) and when it expires (a
// proxy's activation: when the proxy does); endpoints that need no activation (anonymous
// and connect ones) get a zero login and time. A missing, expired or unreadable activation
// is an *InactiveError; other errors come from the store.
func (b *Box) Login(ctx context.Context, st domain.Store, userID int64, ep domain.Endpoint, now time.Time) (domain.Login, time.Time, error) {
	if !ep.NeedsActivation() {
		return domain.Login{}, time.Time{}, nil
	}
	a, err := st.Activation(ctx, userID, ep.ID)
	switch {
	case domain.IsNotFound(err):
		return domain.Login{}, time.Time{}, &InactiveError{Nice: domain.NiceNotActivated,
			Message: fmt.Sprintf("endpoint %s is not activated; activate it first", ep.DisplayName())}
	case err != nil:
		return domain.Login{}, time.Time{}, err
	case a.Expired(now):
		return domain.Login{}, time.Time{}, &InactiveError{Nice: domain.NiceCredentialExpired,
			Message: fmt.Sprintf("the credential for %s expired at %s; activate it again",
				ep.DisplayName(), a.Expires.UTC().Format(time.RFC3339))}
	}
	l, err := b.Open(a.Sealed, Context(userID, ep.ID))
	if err != nil {
		return domain.Login{}, time.Time{}, &InactiveError{Nice: domain.NiceNotActivated,
			Message: fmt.Sprintf("the credential for %s cannot be read; activate it again", ep.DisplayName())}
	}
	if (ep.Auth == domain.AuthGSI) != (l.Proxy != "") {
		// The endpoint's auth method changed since: a password cannot
		// log in to a gsi endpoint, nor a proxy to a password one.
		return domain.Login{}, time.Time{}, &InactiveError{Nice: domain.NiceNotActivated,
			Message: fmt.Sprintf("endpoint %s now takes a %s credential; activate it again", ep.DisplayName(), ep.Auth)}
	}
	return l, a.Expires, nil
}
