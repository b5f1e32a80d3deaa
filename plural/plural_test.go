package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		noun string
		want string
	}{
		{0, "file", "0 files"},
		{1, "file", "1 file"},
		{2, "file", "2 files"},
		{1, "waiting task", "1 waiting task"},
		{3, "waiting task", "3 waiting tasks"},
		{1, "batch", "1 batch"},
		{2, "batch", "2 batches"},
		{2, "fault", "2 faults"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q; want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
