package gridftp

import (
	"fmt"
	"strings"
)

// Layout says which stripe of a striped endpoint holds which bytes of a
// file (OPTS RETR StripeLayout, GFD.20): Blocked deals blocks of
// BlockSize bytes to the stripes in turn, Partitioned gives each stripe
// one contiguous part of the transfer. Both sides of a striped transfer
// use it: the movers of a sending endpoint to split the file among
// themselves, and every sender to pick the receiving stripe of a block.
type Layout struct {
	Partitioned bool
	BlockSize   int64 // Blocked; 0 means DefaultStripeBlock
}

// DefaultStripeBlock is the block of the Blocked layout when none is
// given: GCT's default (-stripe-blocksize).
const DefaultStripeBlock = 1 << 20

// String renders the layout as OPTS RETR items.
func (l Layout) String() string {
	if l.Partitioned {
		return "StripeLayout=Partitioned;"
	}
	return fmt.Sprintf("StripeLayout=Blocked;BlockSize=%d;", l.block())
}

func (l Layout) block() int64 {
	if l.BlockSize > 0 {
		return l.BlockSize
	}
	return DefaultStripeBlock
}

// parseStripeLayout reads the value of StripeLayout=.
func parseStripeLayout(v string) (partitioned bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "blocked":
		return false, nil
	case "partitioned":
		return true, nil
	}
	return false, fmt.Errorf("gridftp: stripe layout %q", truncate(v))
}

// Split gives the part of segs (the byte ranges of one transfer of the
// file region [base, end)) that stripe i of n holds: for Blocked, the
// blocks b (counted from offset 0 of the file) with b mod n == i; for
// Partitioned, the i-th of n equal parts of [base, end).
func (l Layout) Split(segs []Range, base, end int64, i, n int) []Range {
	if n <= 1 {
		return clip(segs, base, end)
	}
	if l.Partitioned {
		part := (end - base + int64(n) - 1) / int64(n)
		lo := min(base+int64(i)*part, end)
		return clip(segs, lo, min(lo+part, end))
	}
	bs := l.block()
	var out []Range
	for _, s := range clip(segs, base, end) {
		for b := s.Start / bs; b*bs < s.End; b++ {
			if int(b%int64(n)) != i {
				continue
			}
			r := Range{Start: max(b*bs, s.Start), End: min((b+1)*bs, s.End)}
			if k := len(out); k > 0 && out[k-1].End == r.Start {
				out[k-1].End = r.End
			} else {
				out = append(out, r)
			}
		}
	}
	return out
}

// clip returns the parts of segs within [lo, hi).
func clip(segs []Range, lo, hi int64) []Range {
	var out []Range
	for _, s := range segs {
		if r := (Range{Start: max(s.Start, lo), End: min(s.End, hi)}); r.Len() > 0 {
			out = append(out, r)
		}
	}
	return out
}

// StripePlan is what one sender of a striped transfer sends to each
// receiving stripe, and which end-of-data counts it announces.
type StripePlan struct {
	// Segs[j] are the ranges this sender sends to receiving stripe j;
	// empty when it sends none there.
	Segs [][]Range
	// EOF[j] is the EOD count this sender announces on stripe j; 0 when
	// another sender announces it.
	EOF []int
}

// PlanStripes plans sender i of n of a striped transfer of segs (within
// the region [base, end)) to m receiving stripes. Senders split the data
// by l; a block goes to the receiving stripe l gives its offset. Every
// sender keeps streams connections to every receiving stripe, with data
// for it or not, and ends each with an EOD: the set of connections stays
// the same from one transfer to the next, as a pipelining client needs
// (a connection new to a receiver that still takes the previous file
// would be taken for that file's). So each stripe's EOF, from sender 0,
// counts n*streams.
func PlanStripes(l Layout, segs []Range, base, end int64, i, n, m, streams int) StripePlan {
	p := StripePlan{Segs: make([][]Range, m), EOF: make([]int, m)}
	mine := l.Split(segs, base, end, i, max(n, 1))
	for j := range m {
		p.Segs[j] = l.Split(mine, base, end, j, m)
		if i == 0 {
			p.EOF[j] = max(n, 1) * streams
		}
	}
	return p
}
