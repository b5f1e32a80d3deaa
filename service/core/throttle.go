package core

import (
	"cmp"
	"time"

	"ferry/internal/throttle"
)

// LoginLimits slow down password guessing (Service.Login). After Free
// failed logins for one user name (from any address), or FreeAddress from
// one client address (an IPv4 address, an IPv6 /64, whatever user names
// they tried), each further try must wait: First after the next failure,
// twice as long after each one more, at most Max. A try made too early is
// answered 429 with Retry-After, and its password is not looked at, so a
// guess gets no answer at all. The right password clears its user name's
// failures (not its address's: an attacker with an account of his own
// would clear them between guesses); failures are forgotten after Forget
// without one. Zero fields take the defaults: 5, 20, 1 s, 15 min, 1 h.
//
// The counts are this process's: with several processes, each one
// throttles the guesses it sees. Behind a proxy every client has the
// proxy's address, and the per-address limit counts them all together.
type LoginLimits struct {
	Free, FreeAddress  int
	First, Max, Forget time.Duration
}

// logins counts failed logins (package throttle) under limits.
type logins struct {
	limits LoginLimits
	t      *throttle.Throttle
}

// logins is the counter of failed logins, made at its first use.
func (s *Service) logins() *logins {
	s.loginsOnce.Do(func() { s.failedLogins = newLogins(s.LoginLimits, s.now) })
	return s.failedLogins
}

func newLogins(l LoginLimits, now func() time.Time) *logins {
	l = LoginLimits{
		Free: cmp.Or(l.Free, 5), FreeAddress: cmp.Or(l.FreeAddress, 20),
		First: cmp.Or(l.First, time.Second), Max: cmp.Or(l.Max, 15*time.Minute), Forget: cmp.Or(l.Forget, time.Hour),
	}
	return &logins{limits: l, t: &throttle.Throttle{Base: l.First, Max: l.Max, Forget: l.Forget, Now: now}}
}

// keys are what a login as name from remote (host:port) counts against: the user name, then the address.
func (l *logins) keys(name, remote string) []throttle.Key {
	if len(name) > 128 { // no user has such a name: all are one
		name = name[:128]
	}
	return []throttle.Key{{Name: "user " + name, Free: l.limits.Free},
		{Name: "addr " + throttle.AddressKey(remote), Free: l.limits.FreeAddress}}
}
