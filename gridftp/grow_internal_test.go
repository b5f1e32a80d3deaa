package gridftp

import (
	"testing"
	"time"
)

// TestProber: the probe adds half as many streams again once the first
// streams' rate stops falling, keeps growing while the rate rises with them, and stops
// at the first step that does not pay (going back to the streams before
// it) or at the maximum.
func TestProber(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n, mx int
		rates []float64 // one per period
		adds  []int     // what each period's step adds
		n2    int       // streams at the end that paid
		done  bool
	}{
		{"loss-bound: grows to the maximum", 16, 64,
			[]float64{50, 80, 100, 120, 150, 160, 220, 240},
			[]int{0, 8, 0, 12, 0, 18, 0, 10}, 64, false},
		{"then stops at the maximum", 16, 64,
			[]float64{50, 80, 100, 120, 150, 160, 220, 240, 300, 330},
			[]int{0, 8, 0, 12, 0, 18, 0, 10, 0, 0}, 64, true},
		{"link-bound: one probe, no more", 16, 64,
			[]float64{50, 100, 105, 108, 110},
			[]int{0, 8, 0, 0, 0}, 16, true},
		{"a rise under a fifth for half again does not pay", 16, 64,
			[]float64{50, 100, 100, 119},
			[]int{0, 8, 0, 0}, 16, true},
		{"a fifth does", 16, 64,
			[]float64{50, 100, 100, 121},
			[]int{0, 8, 0, 12}, 36, false},
		{"second probe fails: back to the first's", 4, 64,
			[]float64{10, 20, 25, 30, 30, 31},
			[]int{0, 2, 0, 3, 0, 0}, 6, true},
		{"settles while the rate falls (cubic after slow start)", 16, 64,
			[]float64{300, 220, 110, 90, 85, 80},
			[]int{0, 0, 0, 0, 8, 0}, 24, false},
		{"at the maximum already", 8, 8,
			[]float64{10, 20},
			[]int{0, 0}, 8, true},
		{"one stream", 1, 4,
			[]float64{10, 10, 15, 20},
			[]int{0, 1, 0, 1}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &prober{n: tc.n, max: tc.mx}
			for i, r := range tc.rates {
				if got := p.step(r); got != tc.adds[i] {
					t.Fatalf("period %d (rate %v): adds %d, want %d", i, r, got, tc.adds[i])
				}
			}
			if p.n != tc.n2 || p.done != tc.done {
				t.Fatalf("ends with %d streams, done %v; want %d, %v", p.n, p.done, tc.n2, tc.done)
			}
		})
	}
}

func TestGrowPeriod(t *testing.T) {
	for _, tc := range []struct{ rtt, want time.Duration }{
		{0, 2 * time.Second},
		{100 * time.Microsecond, time.Second},
		{60 * time.Millisecond, time.Second},
		{150 * time.Millisecond, 2400 * time.Millisecond},
		{time.Second, 8 * time.Second},
	} {
		if got := growPeriod(tc.rtt); got != tc.want {
			t.Errorf("growPeriod(%v) = %v, want %v", tc.rtt, got, tc.want)
		}
	}
}
