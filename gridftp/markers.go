package gridftp

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PerfMarker is the 112 reply a receiving server sends while data moves.
type PerfMarker struct {
	Time        time.Time
	StripeIndex int
	Bytes       int64 // bytes transferred by this stripe so far
	StripeCount int
}

// Reply renders the marker the way GCT does.
func (m PerfMarker) Reply() Reply {
	ts := float64(m.Time.UnixNano()/1e8) / 10
	return Reply{Code: CodePerfMarker, Lines: []string{
		"Perf Marker",
		fmt.Sprintf(" Timestamp:  %.1f", ts),
		fmt.Sprintf(" Stripe Index: %d", m.StripeIndex),
		fmt.Sprintf(" Stripe Bytes Transferred: %d", m.Bytes),
		fmt.Sprintf(" Total Stripe Count: %d", m.StripeCount),
		"End.",
	}}
}

// ParsePerfMarker reads a 112 reply. Keys are matched without regard to
// case or spacing, since peers' versions differ.
func ParsePerfMarker(r Reply) (PerfMarker, error) {
	var m PerfMarker
	if r.Code != CodePerfMarker {
		return m, fmt.Errorf("gridftp: %d is not a perf marker", r.Code)
	}
	seen := 0
	for _, l := range r.Lines {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.Join(strings.Fields(k), " "))
		v = strings.TrimSpace(v)
		switch k {
		case "timestamp":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return m, fmt.Errorf("gridftp: perf marker timestamp %q", v)
			}
			m.Time = time.Unix(0, int64(f*1e9))
		case "stripe index":
			m.StripeIndex, _ = strconv.Atoi(v)
		case "stripe bytes transferred":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return m, fmt.Errorf("gridftp: perf marker bytes %q", v)
			}
			m.Bytes = n
			seen++
		case "total stripe count":
			m.StripeCount, _ = strconv.Atoi(v)
		}
	}
	if seen == 0 {
		return m, fmt.Errorf("gridftp: perf marker without byte count")
	}
	return m, nil
}

// RangeMarkerReply renders a 111 marker for the given ranges.
func RangeMarkerReply(rs Ranges) Reply {
	return Reply{Code: CodeRestartMarker, Lines: []string{"Range Marker " + rs.String()}}
}

// ParseRangeMarker reads a 111 reply.
func ParseRangeMarker(r Reply) (Ranges, error) {
	t := strings.TrimSpace(r.Text())
	i := strings.LastIndexByte(t, ' ')
	if r.Code != CodeRestartMarker || i < 0 {
		return Ranges{}, fmt.Errorf("gridftp: not a range marker: %q", truncate(t))
	}
	return ParseRanges(t[i+1:])
}
