package connlimit

import (
	"errors"
	"testing"
)

// TestCounter: a connection is refused past the total or its address's
// limit, a limit of 0 or less is none, and a connection given back makes
// room for one more.
func TestCounter(t *testing.T) {
	type step struct {
		give bool // Give instead of Take
		addr string
		want error
	}
	tests := []struct {
		name           string
		total, perAddr int
		steps          []step
		held           int
	}{
		{"per address", 10, 2, []step{{false, "a", nil}, {false, "a", nil}, {false, "a", ErrAddress}, {false, "b", nil}}, 3},
		{"total", 3, 2, []step{{false, "a", nil}, {false, "b", nil}, {false, "c", nil}, {false, "d", ErrTotal}}, 3},
		{"no limits", 0, -1, []step{{false, "a", nil}, {false, "a", nil}, {false, "a", nil}}, 3},
		{"given back", 2, 1, []step{{false, "a", nil}, {false, "a", ErrAddress}, {true, "a", nil}, {false, "a", nil}, {false, "b", nil}, {false, "c", ErrTotal}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Counter
			for i, s := range tc.steps {
				if s.give {
					c.Give(s.addr)
					continue
				}
				if err := c.Take(s.addr, tc.total, tc.perAddr); !errors.Is(err, s.want) {
					t.Fatalf("step %d: Take(%q) = %v, want %v", i, s.addr, err, s.want)
				}
			}
			if got := c.Total(); got != tc.held {
				t.Errorf("Total() = %d, want %d", got, tc.held)
			}
		})
	}
}
