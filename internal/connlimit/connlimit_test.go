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

// TakeN takes all n or none, and GiveN gives them back.
func TestCounterN(t *testing.T) {
	var c Counter
	if err := c.TakeN("a", 3, 4, 4); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		n    int
		want error
	}{{"b", 2, ErrTotal}, {"a", 2, ErrTotal}, {"a", 1, nil}} {
		if err := c.TakeN(tc.addr, tc.n, 4, 4); !errors.Is(err, tc.want) {
			t.Fatalf("TakeN(%s, %d) = %v, want %v", tc.addr, tc.n, err, tc.want)
		}
	}
	c.GiveN("a", 4)
	if c.Total() != 0 {
		t.Fatalf("Total() = %d after GiveN, want 0", c.Total())
	}
	if err := c.TakeN("a", 3, 0, 2); !errors.Is(err, ErrAddress) {
		t.Fatalf("TakeN past the address's limit = %v, want ErrAddress", err)
	}
}
