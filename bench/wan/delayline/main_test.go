package main

import (
	"testing"
	"time"
)

func TestParseDirs(t *testing.T) {
	const ms = time.Millisecond
	ab := linkFlags{rate: "1gbit", delay: "30ms", loss: "0.0001", queue: "auto"}
	for _, c := range []struct {
		name   string
		ab, ba linkFlags
		want   [2]dirConf
	}{
		{"symmetric: B->A is A->B", ab, linkFlags{}, [2]dirConf{
			{rate: 1e9, delay: 30 * ms, loss: 0.0001, qBytes: 7_500_000},
			{rate: 1e9, delay: 30 * ms, loss: 0.0001, qBytes: 7_500_000}}},
		{"B->A's own rate, delay, loss", ab, linkFlags{rate: "100mbit", delay: "10ms", loss: "0"}, [2]dirConf{
			// RTT 40 ms: A->B's BDP 5 MB, B->A's (100 Mbit/s) 500 KB
			{rate: 1e9, delay: 30 * ms, loss: 0.0001, qBytes: 5_000_000},
			{rate: 1e8, delay: 10 * ms, loss: 0, qBytes: 500_000}}},
		{"shallow A->B, deep B->A", linkFlags{rate: "1gbit", delay: "10ms", loss: "0", queue: "0.25bdp"}, linkFlags{queue: "2bdp"}, [2]dirConf{
			{rate: 1e9, delay: 10 * ms, qBytes: 625_000},
			{rate: 1e9, delay: 10 * ms, qBytes: 5_000_000}}},
		{"packets", linkFlags{rate: "1gbit", delay: "1ms", loss: "0", queue: "100"}, linkFlags{queue: "8MB"}, [2]dirConf{
			{rate: 1e9, delay: ms, qPkts: 100},
			{rate: 1e9, delay: ms, qBytes: 8e6}}},
	} {
		got, err := parseDirs(c.ab, c.ba)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, ba := range []linkFlags{{rate: "fast"}, {delay: "-1ms"}, {delay: "soon"}, {loss: "2"}, {loss: "x"}, {queue: "lots"}} {
		if _, err := parseDirs(ab, ba); err == nil {
			t.Errorf("B->A %+v: no error", ba)
		}
	}
}
