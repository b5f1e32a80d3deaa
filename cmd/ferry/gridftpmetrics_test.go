package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/gridftp/server"
)

// The collector of ferry gridftp --metrics-listen reports each of the
// server's Stats under its name and labels.
func TestGridFTPCollector(t *testing.T) {
	srv := &server.Server{Stats: &server.Stats{}}
	s := srv.Stats
	s.Sessions.Add(3)
	s.BytesIn.Add(10)
	s.BytesOut.Add(20)
	s.Succeeded.Add(4)
	s.Failed.Add(5)
	s.Aborted.Add(6)
	s.Transient.Add(7)
	s.Permanent.Add(8)
	reg := prometheus.NewRegistry()
	reg.MustRegister(gridftpCollector{srv})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for _, tt := range []struct {
		series string
		want   float64
	}{
		{"ferry_gridftp_sessions", 0},
		{"ferry_gridftp_sessions_total", 3},
		{"ferry_gridftp_bytes_total/in", 10},
		{"ferry_gridftp_bytes_total/out", 20},
		{"ferry_gridftp_transfers_total/succeeded", 4},
		{"ferry_gridftp_transfers_total/failed", 5},
		{"ferry_gridftp_transfers_total/aborted", 6},
		{"ferry_gridftp_errors_total/transient", 7},
		{"ferry_gridftp_errors_total/permanent", 8},
	} {
		if v, ok := got[tt.series]; !ok || v != tt.want {
			t.Errorf("%s = %v (reported: %v), want %v", tt.series, v, ok, tt.want)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d series, want 9: %v", len(got), got)
	}
}
