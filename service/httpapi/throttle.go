package httpapi

import (
	"cmp"
	"net"
	"net/netip"
	"sync"
	"time"
)

// LoginLimits slow down password guessing at POST /auth/login. After Free
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

func (l LoginLimits) normal() LoginLimits {
	return LoginLimits{
		Free: cmp.Or(l.Free, 5), FreeAddress: cmp.Or(l.FreeAddress, 20),
		First: cmp.Or(l.First, time.Second), Max: cmp.Or(l.Max, 15*time.Minute), Forget: cmp.Or(l.Forget, time.Hour),
	}
}

// maxStrikes bounds how many user names and addresses a throttle keeps.
const maxStrikes = 100_000

// throttle keeps the failed logins of user names and addresses.
type throttle struct {
	mu     sync.Mutex
	limits LoginLimits
	seen   map[string]*strikes // by "user " + name or "addr " + address
}

// strikes are the failures of one user name or address: tries that have
// not been cleared.
type strikes struct {
	n    int
	last time.Time
}

func newThrottle(l LoginLimits) *throttle {
	return &throttle{limits: l.normal(), seen: map[string]*strikes{}}
}

// key is what a throttle counts failures of, with its free failures.
type key struct {
	key  string
	free int
}

// keys are the keys of a login as name from remote (an http.Request's
// RemoteAddr): the user name, then the address.
func (t *throttle) keys(name, remote string) [2]key {
	addr := remote
	if host, _, err := net.SplitHostPort(remote); err == nil {
		addr = host
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		a = a.Unmap().WithZone("")
		addr = a.String()
		if a.Is6() {
			addr = netip.PrefixFrom(a, 64).Masked().String()
		}
	}
	if len(name) > 128 { // no user has such a name: all are one
		name = name[:128]
	}
	return [2]key{{"user " + name, t.limits.Free}, {"addr " + addr, t.limits.FreeAddress}}
}

// try takes a try at now for a login as name from remote, counted as a
// failure until done clears it, or says how long the login must wait.
func (t *throttle) try(name, remote string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := t.keys(name, remote)
	var wait time.Duration
	for _, k := range keys {
		if s := t.current(k.key, now); s != nil && s.n >= k.free {
			step := min(s.n-k.free, 30)
			wait = max(wait, s.last.Add(min(t.limits.First<<step, t.limits.Max)).Sub(now))
		}
	}
	if wait > 0 {
		return wait
	}
	for _, k := range keys {
		s := t.current(k.key, now)
		if s == nil {
			s = t.add(k.key, now)
		}
		s.n++
		s.last = now
	}
	return 0
}

// done settles a try: a wrong password stays a failure; the right one
// clears the user name's failures and takes the try back from the
// address; an error that was no answer to the password takes it back from
// both.
func (t *throttle) done(name, remote string, wrong, right bool) {
	if wrong {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := t.keys(name, remote)
	for i, k := range keys {
		s := t.seen[k.key]
		switch {
		case s == nil:
		case right && i == 0 || s.n <= 1:
			delete(t.seen, k.key)
		default:
			s.n--
		}
	}
}

// current is key's strikes, unless forgotten at now.
func (t *throttle) current(key string, now time.Time) *strikes {
	s := t.seen[key]
	if s != nil && now.Sub(s.last) >= t.limits.Forget {
		delete(t.seen, key)
		return nil
	}
	return s
}

// add starts key's strikes, making room when the throttle is full: the
// forgotten ones go, then the oldest.
func (t *throttle) add(key string, now time.Time) *strikes {
	if len(t.seen) >= maxStrikes {
		var oldest string
		for k, s := range t.seen {
			if now.Sub(s.last) >= t.limits.Forget {
				delete(t.seen, k)
			} else if oldest == "" || s.last.Before(t.seen[oldest].last) {
				oldest = k
			}
		}
		if len(t.seen) >= maxStrikes {
			delete(t.seen, oldest)
		}
	}
	s := &strikes{}
	t.seen[key] = s
	return s
}
