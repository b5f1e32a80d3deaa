package httpapi

import (
	"strconv"
	"testing"
	"time"
)

// TestThrottleAddresses: an IPv6 client is counted by its /64 (it has all
// of it), an IPv4 one by its address, written in either form.
func TestThrottleAddresses(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"[2001:db8:1:2::1]:5000", "[2001:db8:1:2:ffff::9]:6000", true},
		{"[2001:db8:1:2::1]:5000", "[2001:db8:1:3::1]:5000", false},
		{"192.0.2.1:5000", "[::ffff:192.0.2.1]:6000", true},
		{"192.0.2.1:5000", "192.0.2.2:5000", false},
	} {
		th := newThrottle(LoginLimits{Free: 100, FreeAddress: 1})
		if wait := th.try("u1", tc.a, now); wait != 0 {
			t.Fatalf("first try: wait %v", wait)
		}
		if wait := th.try("u2", tc.b, now); (wait > 0) != tc.same {
			t.Errorf("%s then %s: wait %v; want one count: %v", tc.a, tc.b, wait, tc.same)
		}
	}
}

// TestThrottleBounded: a throttle full of user names makes room for a new
// one by forgetting the oldest, not by growing.
func TestThrottleBounded(t *testing.T) {
	th := newThrottle(LoginLimits{Free: 1, FreeAddress: 1 << 30})
	start := time.Now()
	for i := range maxStrikes {
		th.try("user"+strconv.Itoa(i), "192.0.2.1:1", start.Add(time.Duration(i)))
	}
	th.try("new", "192.0.2.1:1", start.Add(time.Hour/2))
	if len(th.seen) > maxStrikes {
		t.Fatalf("%d entries, want at most %d", len(th.seen), maxStrikes)
	}
	if _, ok := th.seen["user user0"]; ok {
		t.Error("the oldest user name is still kept")
	}
	if _, ok := th.seen["user user9"]; !ok {
		t.Error("a recent user name was forgotten")
	}
}
