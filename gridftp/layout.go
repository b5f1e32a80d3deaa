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
	// Connect[j] says whether the sender opens connections to stripe j:
	// it has data for it, or no sender has and it announces the EOF.
	Connect []bool
	// EOF[j] is the EOD count this sender announces on stripe j; 0 when
	// another sender announces it. Each receiving stripe gets one EOF,
	// counting every connection into it, from the lowest sender with
	// data for it (sender 0 when none has).
	EOF []int
}

// PlanStripes plans sender i of n of a striped transfer of segs (within
// the region [base, end)) to m receiving stripes, each sender opening
// streams connections to each stripe it sends to. Senders split the data
// by l; a block goes to the receiving stripe l gives its offset.
func PlanStripes(l Layout, segs []Range, base, end int64, i, n, m, streams int) StripePlan {
	p := StripePlan{Segs: make([][]Range, m), Connect: make([]bool, m), EOF: make([]int, m)}
	senders := make([]int, m)
	lowest := make([]int, m)
	for j := range lowest {
		lowest[j] = -1
	}
	for k := range max(n, 1) {
		mine := l.Split(segs, base, end, k, n)
		for j := range m {
			part := l.Split(mine, base, end, j, m)
			if len(part) == 0 {
				continue
			}
			senders[j]++
			if lowest[j] < 0 {
				lowest[j] = k
			}
			if k == i {
				p.Segs[j], p.Connect[j] = part, true
			}
		}
	}
	for j := range m {
		if senders[j] == 0 {
			senders[j], lowest[j] = 1, 0
			p.Connect[j] = i == 0
		}
		if lowest[j] == i {
			p.EOF[j] = senders[j] * streams
		}
	}
	return p
}
