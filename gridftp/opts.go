package gridftp

import (
	"fmt"
	"strconv"
	"strings"
)

// RetrOptions are the settings of "OPTS RETR".
type RetrOptions struct {
	Parallelism int // streams the sender opens; 0 when not given
	// MaxParallelism is the most streams the sender may grow to while a
	// transfer runs (the third number; ferry's servers honour it, FEAT
	// STREAMGROW); 0 when not given or not above Parallelism.
	MaxParallelism int
	Markers        int // seconds between 112 markers on RETR; 0 when not given
	BlockSize      int // StripeLayout block size; 0 when not given
	// Layout is StripeLayout's value, when given (HasLayout).
	Layout    Layout
	HasLayout bool
}

// ParseRetrOptions parses "Parallelism=4,4,4;Markers=5;". Like GCT it
// insists on the ';' after every item.
func ParseRetrOptions(s string) (RetrOptions, error) {
	var o RetrOptions
	s = strings.TrimSpace(s)
	if s == "" || !strings.HasSuffix(s, ";") {
		return o, fmt.Errorf("gridftp: OPTS RETR items must end with ';'")
	}
	for _, item := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return o, fmt.Errorf("gridftp: OPTS RETR item %q", truncate(item))
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "parallelism":
			nums := strings.Split(v, ",")
			n, err := strconv.Atoi(strings.TrimSpace(nums[0]))
			if err != nil || n < 1 || n > MaxStreams {
				return o, fmt.Errorf("gridftp: parallelism %q", truncate(v))
			}
			o.Parallelism = n
			if len(nums) == 3 {
				// start,min,max (GFD.20); like GCT, a malformed min or
				// max is not an error: only the start counts then.
				if m, err := strconv.Atoi(strings.TrimSpace(nums[2])); err == nil && m > n {
					o.MaxParallelism = min(m, MaxStreams)
				}
			}
		case "markers":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 || n > 86400 {
				return o, fmt.Errorf("gridftp: markers %q", truncate(v))
			}
			o.Markers = n
		case "blocksize":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 || n > 64<<20 {
				return o, fmt.Errorf("gridftp: block size %q", truncate(v))
			}
			o.BlockSize = n
		case "stripelayout":
			p, err := parseStripeLayout(v)
			if err != nil {
				return o, err
			}
			o.Layout.Partitioned, o.HasLayout = p, true
		case "parallelism_mode", "mode":
		default:
			return o, fmt.Errorf("gridftp: unknown OPTS RETR item %q", truncate(k))
		}
	}
	if !o.Layout.Partitioned {
		o.Layout.BlockSize = int64(o.BlockSize)
	}
	return o, nil
}
