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

// wait is how long r must still wait, when it may fail free times before
// it waits at all.
func (t *Throttle) wait(r *record, free int, now time.Time) time.Duration {
	over := r.failures - free
	if over <= 0 {
		return 0
	}
	d := or(t.Max, DefaultMax)
	if over <= 30 {
		d = min(d, or(t.Base, DefaultBase)<<(over-1))
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

// Fail records a failed try of each key.
func (t *Throttle) Fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		r := t.lookup(k, now)
		if r == nil {
			t.makeRoom(now)
			r = &record{}
			if t.keys == nil {
				t.keys = map[string]*record{}
			}
			t.keys[k] = r
		}
		r.failures++
		r.last = now
	}
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
