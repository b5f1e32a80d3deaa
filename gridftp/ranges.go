package gridftp

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Range is a half-open byte range [Start, End).
type Range struct{ Start, End int64 }

// Len is the number of bytes in the range.
func (r Range) Len() int64 { return r.End - r.Start }

// Ranges is a set of byte ranges kept sorted and merged. The zero value is
// empty and ready to use.
type Ranges struct{ rs []Range }

// ErrBadRanges reports a malformed range list.
var ErrBadRanges = errors.New("gridftp: bad range list")

// maxRanges bounds a parsed list, so that a hostile REST cannot grow memory.
const maxRanges = 100000

// ParseRanges parses "a-b,c-d" (the MODE E REST argument and 111 marker).
func ParseRanges(s string) (Ranges, error) {
	var out Ranges
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxRanges {
		return out, fmt.Errorf("%w: too many ranges", ErrBadRanges)
	}
	for _, p := range parts {
		a, b, ok := strings.Cut(strings.TrimSpace(p), "-")
		if !ok {
			return Ranges{}, fmt.Errorf("%w: %q", ErrBadRanges, truncate(p))
		}
		start, err1 := strconv.ParseInt(a, 10, 64)
		end, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || start < 0 || end < start || strings.HasPrefix(a, "+") || strings.HasPrefix(b, "+") {
			return Ranges{}, fmt.Errorf("%w: %q", ErrBadRanges, truncate(p))
		}
		out.Add(start, end)
	}
	return out, nil
}

// Add inserts [start, end), merging with touching or overlapping ranges.
func (s *Ranges) Add(start, end int64) {
	if end <= start {
		return
	}
	i := sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End >= start })
	j := i
	for j < len(s.rs) && s.rs[j].Start <= end {
		start = min(start, s.rs[j].Start)
		end = max(end, s.rs[j].End)
		j++
	}
	if i == j {
		s.rs = append(s.rs, Range{})
		copy(s.rs[i+1:], s.rs[i:])
		s.rs[i] = Range{start, end}
		return
	}
	s.rs[i] = Range{start, end}
	s.rs = append(s.rs[:i+1], s.rs[j:]...)
}

// AddAll inserts every range of o.
func (s *Ranges) AddAll(o Ranges) {
	for _, r := range o.rs {
		s.Add(r.Start, r.End)
	}
}

// List returns the ranges in order.
func (s Ranges) List() []Range { return append([]Range(nil), s.rs...) }

// Empty reports whether the set holds no bytes.
func (s Ranges) Empty() bool { return len(s.rs) == 0 }

// Total is the number of bytes covered.
func (s Ranges) Total() int64 {
	var n int64
	for _, r := range s.rs {
		n += r.Len()
	}
	return n
}

// End is where the last range ends; 0 for an empty set.
func (s Ranges) End() int64 {
	if len(s.rs) == 0 {
		return 0
	}
	return s.rs[len(s.rs)-1].End
}

// Contains reports whether [start, end) is covered entirely.
func (s Ranges) Contains(start, end int64) bool {
	i := sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End > start })
	return i < len(s.rs) && s.rs[i].Start <= start && s.rs[i].End >= end
}

// Missing returns the parts of [start, end) that the set does not cover.
func (s Ranges) Missing(start, end int64) []Range {
	var out []Range
	cur := start
	for _, r := range s.rs {
		if r.End <= cur {
			continue
		}
		if r.Start >= end {
			break
		}
		if r.Start > cur {
			out = append(out, Range{cur, r.Start})
		}
		cur = max(cur, r.End)
	}
	if cur < end {
		out = append(out, Range{cur, end})
	}
	return out
}

// String formats the set as "a-b,c-d".
func (s Ranges) String() string {
	var b strings.Builder
	for i, r := range s.rs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d", r.Start, r.End)
	}
	return b.String()
}
