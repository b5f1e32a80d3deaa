// Package core is the managed service's application layer: every rule of
// its use cases — which endpoints a user sees and may change, what an
// endpoint spec and a server URL may be, activation with a password, a
// grid proxy or a MyProxy server, the checks of a submitted transfer —
// over the Store, the file operations and the agents. It implements the
// service interfaces of package domain; the adapters that face users (the
// REST API, the CLI) decode, call it and encode.
package core

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"ferry/gsi"
	"ferry/gsi/myproxy"
	"ferry/internal/netpolicy"
	"ferry/service/domain"
	"ferry/service/secret"
)

// Service implements the service interfaces of domain. Set the exported
// fields before its first use.
type Service struct {
	Store  domain.Store
	Ops    domain.FileOps
	Box    *secret.Box // seals activations
	Logger *slog.Logger
	Now    func() time.Time // the clock; time.Now when nil
	// Queued is called after a task is stored or made runnable again (a
	// submission, an activation that resumed tasks), so that workers in
	// this process look for work at once. Nil: none.
	Queued func()
	// DefaultDeadline is given to tasks submitted without a deadline;
	// until then failing files are retried. Zero: none (the worker's retry
	// budget decides).
	DefaultDeadline time.Duration
	// CheckWithin bounds how long a submission waits for its endpoints to
	// answer whether its paths can be copied (see checkTransfer), and an
	// anonymous endpoint's creation for its server to take an anonymous
	// login (see refusesAnonymous); 0: 2 s, < 0: no check.
	CheckWithin time.Duration
	// Agents reaches connect endpoints' agents through the relays; CAPin
	// is the pin of the relay's CA that setup keys carry. Without it
	// connect endpoints cannot be made or paired.
	Agents domain.Agents
	CAPin  string
	// Revoked is called when a connect endpoint's agent certificates are
	// revoked (a new setup key, the endpoint deleted), so that the relay
	// drops its agent at once; nil: the relay finds out by itself, later.
	Revoked func(endpointID string)
	// Networks says which addresses endpoints' servers may have: a server
	// refused by it is refused when an endpoint is created or changed (the
	// file operations check it again as they connect, see gridops); nil:
	// any.
	Networks *netpolicy.Policy
	// Trust is the grid CAs MyProxy servers' host certificates are
	// checked against (ferry server --gsi-ca-dir); nil: gsi endpoints
	// cannot be activated through a MyProxy server.
	Trust *gsi.Trust
	// MyProxyLogon fetches a proxy from a MyProxy server; nil:
	// myproxy.Logon. Tests put a fake here.
	MyProxyLogon func(ctx context.Context, addr string, o myproxy.Options) (*gsi.Credential, error)
	// MyProxyWithin bounds a MyProxy logon; 0: 30 s.
	MyProxyWithin time.Duration
	// LoginLimits slow down password guessing; zero fields: the defaults.
	LoginLimits LoginLimits

	loginsOnce   sync.Once
	failedLogins *logins    // see logins
	listings     listings   // directory listings being paged (List)
	where        whereCache // where tasks' items are (Task)
}

var (
	_ domain.EndpointService   = (*Service)(nil)
	_ domain.ActivationService = (*Service)(nil)
	_ domain.FileService       = (*Service)(nil)
)

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// queued tells this process's workers that there is work.
func (s *Service) queued() {
	if s.Queued != nil {
		s.Queued()
	}
}

// checkText refuses a user-given string longer than max characters or
// holding control characters.
func checkText(field, s string, max int) error {
	if len([]rune(s)) > max {
		return domain.Errorf(domain.EInvalid, "%s: longer than %d characters", field, max)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return domain.Errorf(domain.EInvalid, "%s: contains a control character", field)
	}
	return nil
}
