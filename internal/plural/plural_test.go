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
		{1, "directory", "1 directory"},
		{2, "directory", "2 directories"},
		{2, "day", "2 days"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q; want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{64 << 20, "64.0 MiB"},
		{3 << 30, "3.0 GiB"},
		{1 << 62, "4.0 EiB"},
	} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
