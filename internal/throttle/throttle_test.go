package throttle_test

import (
	"fmt"
	"testing"
	"time"

	"ferry/internal/throttle"
)

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newThrottle() (*throttle.Throttle, *clock) {
	c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &throttle.Throttle{Base: time.Second, Max: time.Minute, Forget: time.Hour, Now: c.Now}, c
}

func TestBackoff(t *testing.T) {
	th, c := newThrottle()
	const free = 3
	// failures made so far → the wait right after the last of them.
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for n, w := range want {
		if got := th.Wait("alice", free); got != w {
			t.Fatalf("after %d failures: Wait = %v, want %v", n, got, w)
		}
		th.Fail("alice")
	}
	// The wait runs from the last failure.
	c.advance(59 * time.Second)
	if got := th.Wait("alice", free); got != time.Second {
		t.Errorf("59 s after: Wait = %v, want 1s", got)
	}
	c.advance(time.Second)
	if got := th.Wait("alice", free); got != 0 {
		t.Errorf("a minute after: Wait = %v, want 0", got)
	}
	// The count is kept: one more failure waits the longest again.
	th.Fail("alice")
	if got := th.Wait("alice", free); got != time.Minute {
		t.Errorf("after one more failure: Wait = %v, want 1m", got)
	}
	// Keys are independent, and the allowance is the caller's.
	if got := th.Wait("bob", free); got != 0 {
		t.Errorf("bob: Wait = %v", got)
	}
	if got := th.Wait("alice", 100); got != 0 {
		t.Errorf("alice with 100 free: Wait = %v", got)
	}
}

func TestClearAndForget(t *testing.T) {
	th, c := newThrottle()
	for range 5 {
		th.Fail("alice", "addr")
	}
	th.Clear("alice")
	if got := th.Wait("alice", 1); got != 0 {
		t.Errorf("after Clear: Wait = %v", got)
	}
	if got := th.Wait("addr", 1); got == 0 {
		t.Errorf("Clear(alice) cleared addr too")
	}
	c.advance(time.Hour)
	th.Fail("addr")
	if got := th.Wait("addr", 2); got != 0 {
		t.Errorf("an hour later, one failure of two free: Wait = %v, want 0 (the five before are forgotten)", got)
	}
}

func TestManyKeys(t *testing.T) {
	th, _ := newThrottle()
	for range 3 {
		th.Fail("victim")
	}
	// A spray of names, each tried once, fills the table: its own entries
	// make room, not the victim's.
	for i := range 200_000 {
		th.Fail(fmt.Sprint("k", i))
	}
	if got := th.Wait("victim", 1); got != 4*time.Second {
		t.Errorf("victim: Wait = %v, want 4s", got)
	}
}

func TestZeroValue(t *testing.T) {
	var th throttle.Throttle
	th.Fail("k", "k")
	if got := th.Wait("k", 2); got <= 0 || got > throttle.DefaultBase {
		t.Errorf("Wait = %v, want up to %v", got, throttle.DefaultBase)
	}
	if got := th.Wait("k", 3); got != 0 {
		t.Errorf("Wait with 3 free = %v", got)
	}
}

// TestAddressKey: an IPv6 client is counted by its /64 (it has all of
// it), an IPv4 one by its address, written in either form.
func TestAddressKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"[2001:db8:1:2::1]:5000", "[2001:db8:1:2:ffff::9]:6000", true},
		{"[2001:db8:1:2::1]:5000", "[2001:db8:1:3::1]:5000", false},
		{"192.0.2.1:5000", "[::ffff:192.0.2.1]:6000", true},
		{"192.0.2.1:5000", "192.0.2.1", true},
		{"192.0.2.1:5000", "192.0.2.2:5000", false},
		{"[fe80::1%eth0]:1", "[fe80::1]:1", true},
	} {
		if same := throttle.AddressKey(tc.a) == throttle.AddressKey(tc.b); same != tc.same {
			t.Errorf("%s and %s: one key %v (%q, %q), want %v", tc.a, tc.b, same, throttle.AddressKey(tc.a), throttle.AddressKey(tc.b), tc.same)
		}
	}
}

// TestTry: a try counts at once, against every key; the right password
// clears the account and takes the try back from the address; an error
// takes it back from both; a wrong password leaves it counted.
func TestTry(t *testing.T) {
	th, _ := newThrottle()
	keys := []throttle.Key{{Name: "user alice", Free: 0}, {Name: "addr 192.0.2.1", Free: 1}}
	if w := th.Try(keys...); w != 0 {
		t.Fatalf("first try waits %v", w)
	}
	// Made in parallel, before the first is settled: the second waits.
	if w := th.Try(keys...); w == 0 {
		t.Fatal("a second try in flight did not wait")
	}
	th.Void(keys...)
	if w := th.Try(keys...); w != 0 {
		t.Fatalf("after a void try: waits %v", w)
	}
	th.Succeeded(keys...)
	if w := th.Wait("user alice", 0); w != 0 {
		t.Errorf("the account still counts after a success: %v", w)
	}
	if w := th.Try(keys[1]); w != 0 {
		t.Fatalf("the address waits after a success: %v", w)
	}
	// That try is a wrong password: it stays, and with it the address is
	// past its one free failure.
	if w := th.Try(keys[1]); w == 0 {
		t.Error("the address does not wait after two failures")
	}
}
