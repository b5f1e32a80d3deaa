package throttle_test

import (
	"fmt"
	"testing"
	"time"

	"ferry/throttle"
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
	want := []time.Duration{0, 0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
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
	if got := th.Wait("addr", 1); got != 0 {
		t.Errorf("an hour later, one failure: Wait = %v, want 0 (forgotten before)", got)
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
	if got := th.Wait("victim", 1); got != 2*time.Second {
		t.Errorf("victim: Wait = %v, want 2s", got)
	}
}

func TestZeroValue(t *testing.T) {
	var th throttle.Throttle
	th.Fail("k", "k")
	if got := th.Wait("k", 1); got <= 0 || got > throttle.DefaultBase {
		t.Errorf("Wait = %v, want up to %v", got, throttle.DefaultBase)
	}
	if got := th.Wait("k", 2); got != 0 {
		t.Errorf("Wait with 2 free = %v", got)
	}
}
