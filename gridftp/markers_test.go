package gridftp_test

import (
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
)

func TestPerfMarkerRoundTrip(t *testing.T) {
	m := gridftp.PerfMarker{Time: time.Unix(1700000000, 123456789), StripeIndex: 2, Bytes: 1 << 40, StripeCount: 4}
	r := m.Reply()
	var b strings.Builder
	r.WriteTo(&b)
	wire := b.String()
	if !strings.HasPrefix(wire, "112-Perf Marker\r\n") || !strings.HasSuffix(wire, "\r\n112 End.\r\n") {
		t.Fatalf("wire form %q", wire)
	}
	for _, want := range []string{" Timestamp:  1700000000.1\r\n", " Stripe Index: 2\r\n",
		" Stripe Bytes Transferred: 1099511627776\r\n", " Total Stripe Count: 4\r\n"} {
		if !strings.Contains(wire, want) {
			t.Errorf("wire form lacks %q:\n%s", want, wire)
		}
	}
	back, err := readReplyString(wire)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gridftp.ParsePerfMarker(back)
	if err != nil {
		t.Fatal(err)
	}
	if got.StripeIndex != 2 || got.Bytes != 1<<40 || got.StripeCount != 4 {
		t.Fatalf("ParsePerfMarker = %+v", got)
	}
	if d := got.Time.Sub(m.Time); d < -100*time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("time %v, want about %v", got.Time, m.Time)
	}
}

func TestParsePerfMarker(t *testing.T) {
	tests := []struct {
		name  string
		wire  string
		bytes int64
		ok    bool
	}{
		{"GCT 13", "112-Perf Marker\r\n Timestamp:  1700000000.5\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 10485760\r\n Total Stripe Count: 1\r\n112 End.\r\n", 10485760, true},
		{"tight spacing", "112-Perf Marker\r\nTimestamp:1700000000.5\r\nStripe Index:0\r\nStripe Bytes Transferred:7\r\nTotal Stripe Count:1\r\n112 End.\r\n", 7, true},
		{"odd case and spaces", "112-Perf Marker\r\n  timestamp :  1700000000\r\n STRIPE  BYTES   transferred:   9 \r\n112 End\r\n", 9, true},
		{"dashed lines", "112-Perf Marker\r\n112-Timestamp: 1700000000.0\r\n112-Stripe Bytes Transferred: 3\r\n112 End.\r\n", 3, true},
		{"no bytes", "112-Perf Marker\r\n Timestamp: 1700000000.0\r\n112 End.\r\n", 0, false},
		{"bad bytes", "112-Perf Marker\r\n Stripe Bytes Transferred: x\r\n112 End.\r\n", 0, false},
		{"negative bytes", "112-Perf Marker\r\n Stripe Bytes Transferred: -1\r\n112 End.\r\n", 0, false},
		{"bad timestamp", "112-Perf Marker\r\n Timestamp: soon\r\n Stripe Bytes Transferred: 1\r\n112 End.\r\n", 0, false},
		{"wrong code", "111 Range Marker 0-10\r\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := readReplyString(tt.wire)
			if err != nil {
				t.Fatal(err)
			}
			m, err := gridftp.ParsePerfMarker(r)
			if tt.ok != (err == nil) || m.Bytes != tt.bytes {
				t.Fatalf("ParsePerfMarker = %+v, %v; want bytes %d ok %v", m, err, tt.bytes, tt.ok)
			}
		})
	}
}

func TestRangeMarker(t *testing.T) {
	rs := rangesOf(0, 10485760, 20971520, 31457280)
	r := gridftp.RangeMarkerReply(rs)
	if got := r.String(); got != "111 Range Marker 0-10485760,20971520-31457280" {
		t.Fatalf("RangeMarkerReply = %q", got)
	}
	back, err := gridftp.ParseRangeMarker(r)
	if err != nil || back.String() != rs.String() {
		t.Fatalf("ParseRangeMarker = %v, %v", back, err)
	}
	tests := []struct {
		wire string
		want string
		ok   bool
	}{
		{"111 Range Marker 0-10485760\r\n", "0-10485760", true},
		{"111 Range Marker 0-5,10-20 \r\n", "0-5,10-20", true},
		{"111 Range Marker 10-20,0-10\r\n", "0-20", true},
		{"111 Range Marker\r\n", "", false},
		{"111 Range Marker x-y\r\n", "", false},
		{"112 Range Marker 0-1\r\n", "", false},
	}
	for _, tt := range tests {
		r, err := readReplyString(tt.wire)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gridftp.ParseRangeMarker(r)
		if tt.ok != (err == nil) || (err == nil && got.String() != tt.want) {
			t.Errorf("ParseRangeMarker(%q) = %q, %v; want %q ok %v", tt.wire, got.String(), err, tt.want, tt.ok)
		}
	}
}
