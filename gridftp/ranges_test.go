package gridftp_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"ferry/gridftp"
)

type rg = gridftp.Range

func rangesOf(pairs ...int64) gridftp.Ranges {
	var s gridftp.Ranges
	for i := 0; i+1 < len(pairs); i += 2 {
		s.Add(pairs[i], pairs[i+1])
	}
	return s
}

func TestRangesAdd(t *testing.T) {
	tests := []struct {
		name string
		adds [][2]int64
		want string
	}{
		{"empty", nil, ""},
		{"one", [][2]int64{{0, 10}}, "0-10"},
		{"empty range ignored", [][2]int64{{5, 5}}, ""},
		{"reversed range ignored", [][2]int64{{9, 5}}, ""},
		{"disjoint in order", [][2]int64{{0, 10}, {20, 30}}, "0-10,20-30"},
		{"disjoint reversed", [][2]int64{{20, 30}, {0, 10}}, "0-10,20-30"},
		{"insert in middle", [][2]int64{{0, 10}, {40, 50}, {20, 30}}, "0-10,20-30,40-50"},
		{"touching after", [][2]int64{{0, 10}, {10, 20}}, "0-20"},
		{"touching before", [][2]int64{{10, 20}, {0, 10}}, "0-20"},
		{"overlap", [][2]int64{{0, 10}, {5, 15}}, "0-15"},
		{"contained", [][2]int64{{0, 100}, {10, 20}}, "0-100"},
		{"containing", [][2]int64{{10, 20}, {0, 100}}, "0-100"},
		{"bridges two", [][2]int64{{0, 10}, {20, 30}, {10, 20}}, "0-30"},
		{"swallows many", [][2]int64{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {0, 9}}, "0-9"},
		{"partial merge", [][2]int64{{0, 10}, {20, 30}, {40, 50}, {25, 45}}, "0-10,20-50"},
		{"duplicate", [][2]int64{{0, 10}, {0, 10}}, "0-10"},
		{"out of order blocks", [][2]int64{{262144, 524288}, {0, 262144}, {786432, 1000000}, {524288, 786432}}, "0-1000000"},
		{"one byte gap", [][2]int64{{0, 10}, {11, 20}}, "0-10,11-20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s gridftp.Ranges
			for _, a := range tt.adds {
				s.Add(a[0], a[1])
			}
			if got := s.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if s.Empty() != (tt.want == "") {
				t.Fatalf("Empty() = %v", s.Empty())
			}
			var total int64
			for _, r := range s.List() {
				total += r.Len()
			}
			if s.Total() != total {
				t.Fatalf("Total() = %d, want %d", s.Total(), total)
			}
		})
	}
}

func TestRangesAddAllAndList(t *testing.T) {
	a := rangesOf(0, 10, 30, 40)
	b := rangesOf(10, 20, 50, 60)
	a.AddAll(b)
	if got := a.String(); got != "0-20,30-40,50-60" {
		t.Fatalf("AddAll = %q", got)
	}
	l := a.List()
	l[0].End = 999 // List returns a copy
	if a.String() != "0-20,30-40,50-60" {
		t.Fatalf("List aliases the set")
	}
	if a.Total() != 40 {
		t.Fatalf("Total = %d", a.Total())
	}
}

func TestRangesContains(t *testing.T) {
	s := rangesOf(0, 10, 20, 30)
	tests := []struct {
		start, end int64
		want       bool
	}{
		{0, 10, true},
		{0, 5, true},
		{5, 10, true},
		{9, 10, true},
		{20, 30, true},
		{25, 26, true},
		{0, 11, false},
		{5, 25, false},
		{10, 20, false},
		{10, 11, false},
		{19, 21, false},
		{30, 31, false},
		{100, 200, false},
	}
	for _, tt := range tests {
		if got := s.Contains(tt.start, tt.end); got != tt.want {
			t.Errorf("Contains(%d, %d) = %v, want %v", tt.start, tt.end, got, tt.want)
		}
	}
	var empty gridftp.Ranges
	if empty.Contains(0, 1) {
		t.Errorf("empty set contains 0-1")
	}
}

func TestRangesMissing(t *testing.T) {
	s := rangesOf(10, 20, 30, 40)
	tests := []struct {
		start, end int64
		want       []rg
	}{
		{0, 50, []rg{{0, 10}, {20, 30}, {40, 50}}},
		{10, 40, []rg{{20, 30}}},
		{12, 18, nil},
		{15, 35, []rg{{20, 30}}},
		{0, 10, []rg{{0, 10}}},
		{0, 5, []rg{{0, 5}}},
		{40, 45, []rg{{40, 45}}},
		{50, 60, []rg{{50, 60}}},
		{5, 5, nil},
		{20, 30, []rg{{20, 30}}},
	}
	for _, tt := range tests {
		if got := s.Missing(tt.start, tt.end); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Missing(%d, %d) = %v, want %v", tt.start, tt.end, got, tt.want)
		}
	}
	var empty gridftp.Ranges
	if got := empty.Missing(0, 100); !reflect.DeepEqual(got, []rg{{0, 100}}) {
		t.Errorf("empty.Missing = %v", got)
	}
}

func TestParseRanges(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", ""},
		{"  ", ""},
		{"0-10", "0-10"},
		{"0-10485760", "0-10485760"},
		{"0-10,20-30", "0-10,20-30"},
		{" 0-10 , 20-30 ", "0-10,20-30"},
		{"20-30,0-10", "0-10,20-30"},
		{"0-10,10-20", "0-20"},
		{"5-5", ""},
		{"0-9223372036854775807", "0-9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := gridftp.ParseRanges(tt.in)
			if err != nil || s.String() != tt.want {
				t.Fatalf("ParseRanges(%q) = %q, %v; want %q", tt.in, s.String(), err, tt.want)
			}
		})
	}
}

func TestParseRangesErrors(t *testing.T) {
	for _, in := range []string{
		"10", "-10", "10-", "a-b", "0-10,", ",0-10", "0-10,,20-30", "10-5", "-5-10",
		"0-10-20", "0x10-20", "0 - 10", "0-9223372036854775808", "1e3-2e3",
		strings.Repeat("0-1,", 100001) + "0-1",
	} {
		t.Run(in[:min(len(in), 30)], func(t *testing.T) {
			if s, err := gridftp.ParseRanges(in); !errors.Is(err, gridftp.ErrBadRanges) {
				t.Fatalf("ParseRanges(%q) = %q, %v; want ErrBadRanges", in, s.String(), err)
			}
		})
	}
}
