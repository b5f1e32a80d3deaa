package domain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strings"
	"time"
)

// Connect endpoints (ferry connect) are served by an agent that only
// connects out: it keeps a tunnel to the service's relay, through which
// the service reaches the agent's GridFTP server. An agent pairs with its
// endpoint by trading a one-time setup key for a certificate. Each new
// setup key starts a new generation of the endpoint's certificates and
// revokes the earlier ones.

// SetupKeyLifetime is how long a setup key can be used.
const SetupKeyLifetime = 24 * time.Hour

// NeedsActivation reports whether users give the service a credential for
// the endpoint — a password or a grid proxy: not for an anonymous one, nor
// for a connect one, whose agent the relay authenticates.
func (e Endpoint) NeedsActivation() bool { return e.Auth == AuthPassword || e.Auth == AuthGSI }

// Process is a running service process as the others find it in the
// store. Each runs a relay: RelayURL is where agents and the other
// processes reach it, tcp://HOST:PORT or the http(s) URL of the process's
// /relay route. Its record holds until Expires unless the process renews
// it.
type Process struct {
	ID       string
	RelayURL string
	Expires  time.Time
}

// Agents reaches the agents of connect endpoints, through the relay of
// whichever service process each is connected to.
type Agents interface {
	// Dial opens a control connection to the GridFTP server of the agent
	// of endpointID; an *Error with EUnavailable when it is not connected.
	Dial(ctx context.Context, endpointID string) (net.Conn, error)
	// Online reports whether the agent of endpointID is connected, and
	// gives a channel that is closed when it goes away (or may be, once
	// ctx ends: watch it no longer than ctx lasts).
	Online(ctx context.Context, endpointID string) (gone <-chan struct{}, ok bool)
}

// JoinSetupKey makes the setup key a user hands to ferry connect: the
// one-time secret and the pin of the service's CA (which the agent checks
// the relay against before it trusts it), "SECRET.PIN".
func JoinSetupKey(secret, pin string) string { return secret + "." + pin }

// SplitSetupKey splits a setup key made by JoinSetupKey.
func SplitSetupKey(key string) (secret, pin string, err error) {
	secret, pin, ok := strings.Cut(strings.TrimSpace(key), ".")
	if !ok || secret == "" || pin == "" || strings.Contains(pin, ".") {
		return "", "", Errorf(EInvalid, "not a setup key: want the SECRET.PIN that ferry endpoint add --connect printed")
	}
	return secret, pin, nil
}

// SetupKeyHash is what the store keeps of a setup key's secret: its hex
// SHA-256.
func SetupKeyHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
