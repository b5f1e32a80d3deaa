// Package throttle slows down password guessing. It counts the failed
// logins of each key — an account, a client address — and once a key has
// failed more often than it is allowed, makes it wait before its next try,
// twice as long after each further failure, up to a limit. A key that stops
// failing is forgotten after a while; a key that succeeds can be cleared.
//
// It keeps no connection state, so reconnecting does not reset it, and its
// clock is injectable (Throttle.Now), so tests need not sleep.
package throttle

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the zero Throttle.
const (
	DefaultBase   = time.Second
	DefaultMax    = 5 * time.Minute
	DefaultForget = time.Hour
)

// maxKeys bounds the keys remembered (see makeRoom).
const maxKeys = 100_000

// Throttle tracks failures per key. The zero value is ready to use; set
// the fields, if at all, before sharing it. It is safe for concurrent use.
type Throttle struct {
	Base   time.Duration    // the first wait; doubled by each further failure. Default DefaultBase
	Max    time.Duration    // the longest wait. Default DefaultMax
	Forget time.Duration    // a key with no failure for this long starts afresh. Default DefaultForget
	Now    func() time.Time // the clock; default time.Now

	mu   sync.Mutex
	keys map[string]*record
}

// record is what is known of one key.
type record struct {
	failures int
	last     time.Time // of the last failure
}

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// wait is how long r must still wait, when it may fail free times in a
// row before its next try waits: Base after the free-th failure, twice as
// long after each further one.
func (t *Throttle) wait(r *record, free int, now time.Time) time.Duration {
	over := r.failures - free
	if over < 0 {
		return 0
	}
	d := or(t.Max, DefaultMax)
	if over < 30 {
		d = min(d, or(t.Base, DefaultBase)<<over)
	}
	return max(0, r.last.Add(d).Sub(now))
}

// Wait returns how long key must wait before its next try (0: it may try
// now), when it may fail free times in a row before it waits at all.
func (t *Throttle) Wait(key string, free int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	r := t.lookup(key, now)
	if r == nil {
		return 0
	}
	return t.wait(r, free, now)
}

// lookup returns key's record, or nil when there is none or it is stale.
func (t *Throttle) lookup(key string, now time.Time) *record {
	r := t.keys[key]
	if r != nil && now.Sub(r.last) >= or(t.Forget, DefaultForget) {
		delete(t.keys, key)
		return nil
	}
	return r
}

// Key is one thing a login is counted against, with the failures it may
// have in a row before it waits.
type Key struct {
	Name string
	Free int
}

// Try takes a login's try: when no key must wait, it counts the try as a
// failure of each key at once (so that guesses made in parallel cannot
// slip past) and returns 0; else it counts nothing and returns the longest
// wait. Succeeded or Void then settle the try; a wrong password leaves it
// counted.
func (t *Throttle) Try(keys ...Key) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	for _, k := range keys {
		if r := t.lookup(k.Name, now); r != nil {
			wait = max(wait, t.wait(r, k.Free, now))
		}
	}
	if wait > 0 {
		return wait
	}
	for _, k := range keys {
		t.fail(k.Name, now)
	}
	return 0
}

// Succeeded settles a try whose password was right: the first key (the
// account) is cleared, and the try is taken back from the others (an
// address: an attacker with an account of his own must not clear it
// between guesses).
func (t *Throttle) Succeeded(keys ...Key) {
	if len(keys) > 0 {
		t.Clear(keys[0].Name)
		t.Void(keys[1:]...)
	}
}

// Void takes a try back from each key: it was no answer to the password
// (an error before it was checked).
func (t *Throttle) Void(keys ...Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		switch r := t.keys[k.Name]; {
		case r == nil:
		case r.failures <= 1:
			delete(t.keys, k.Name)
		default:
			r.failures--
		}
	}
}

// AddressKey names a client address for counting: the IP, with an IPv6
// address's /64 (one host's share of a network) as one; addr may carry a
// port.
func AddressKey(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Fail records a failed try of each key.
func (t *Throttle) Fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		t.fail(k, now)
	}
}

// fail counts a failure of key at now. Called with t.mu held.
func (t *Throttle) fail(key string, now time.Time) {
	r := t.lookup(key, now)
	if r == nil {
		t.makeRoom(now)
		r = &record{}
		if t.keys == nil {
			t.keys = map[string]*record{}
		}
		t.keys[key] = r
	}
	r.failures++
	r.last = now
}

// Clear forgets key's failures (an account that logged in).
func (t *Throttle) Clear(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}

// makeRoom forgets keys when the table is full, down to three quarters of
// it: first those whose last failure is older than the longest wait (they
// make nobody wait), then those that failed once (a spray of names), then
// any.
func (t *Throttle) makeRoom(now time.Time) {
	if len(t.keys) < maxKeys {
		return
	}
	for _, drop := range []func(*record) bool{
		func(r *record) bool { return now.Sub(r.last) >= or(t.Max, DefaultMax) },
		func(r *record) bool { return r.failures <= 1 },
		func(*record) bool { return true },
	} {
		for k, r := range t.keys {
			if len(t.keys) <= maxKeys*3/4 {
				return
			}
			if drop(r) {
				delete(t.keys, k)
			}
		}
	}
}
