//go:build interop

package interop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServiceMetrics moves a tree with the service between two ferry
// gridftp servers that serve --metrics-listen, then scrapes the real
// /metrics of all three and finds the work counted: the task by status,
// the worker's files and bytes, and each endpoint server's sessions,
// transfers and bytes, in and out.
func TestServiceMetrics(t *testing.T) {
	metricsAddr := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))) }
	srcMetrics, dstMetrics := metricsAddr(), metricsAddr()
	src := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--metrics-listen", srcMetrics}})
	dst := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--metrics-listen", dstMetrics}})
	files := makeServiceTree(t, src.Path("tree"), 8, 0)
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)
	task := c.succeeded(c.transfer("src:/tree", "dst:/tree", "-r"), time.Minute)
	if task.FilesTransferred != int64(files) || task.BytesTransferred == 0 {
		t.Fatalf("task moved %d files, %d bytes; want %d files", task.FilesTransferred, task.BytesTransferred, files)
	}
	bytes, n := float64(task.BytesTransferred), float64(files)

	exact := func(v float64) func(float64) bool { return func(got float64) bool { return got == v } }
	atLeast := func(v float64) func(float64) bool { return func(got float64) bool { return got >= v } }
	for _, tc := range []struct {
		name, url string
		want      map[string]func(float64) bool
	}{
		{"service", s.URL() + "/metrics", map[string]func(float64) bool{
			`ferry_tasks{status="SUCCEEDED"}`:                                        exact(1),
			`ferry_tasks{status="ACTIVE"}`:                                           exact(0),
			`ferry_worker_bytes_total`:                                               exact(bytes),
			`ferry_worker_files_total{result="succeeded"}`:                           exact(n),
			`ferry_worker_files_total{result="failed"}`:                              exact(0),
			`ferry_worker_leases`:                                                    exact(0),
			`ferry_http_requests_total{code="202",route="POST /api/v0.10/transfer"}`: exact(1),
		}},
		{"source", "http://" + srcMetrics + "/metrics", map[string]func(float64) bool{
			`ferry_gridftp_sessions_total`:                       atLeast(1),
			`ferry_gridftp_bytes_total{direction="out"}`:         exact(bytes),
			`ferry_gridftp_bytes_total{direction="in"}`:          exact(0),
			`ferry_gridftp_transfers_total{outcome="succeeded"}`: exact(n),
			`ferry_gridftp_transfers_total{outcome="failed"}`:    exact(0),
		}},
		{"destination", "http://" + dstMetrics + "/metrics", map[string]func(float64) bool{
			`ferry_gridftp_sessions_total`:                       atLeast(1),
			`ferry_gridftp_bytes_total{direction="in"}`:          exact(bytes),
			`ferry_gridftp_bytes_total{direction="out"}`:         exact(0),
			`ferry_gridftp_transfers_total{outcome="succeeded"}`: exact(n),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scrape(t, tc.url)
			for series, ok := range tc.want {
				if v, found := got[series]; !found || !ok(v) {
					t.Errorf("%s = %v (present: %v); the task moved %d files, %d bytes", series, v, found, files, task.BytesTransferred)
				}
			}
		})
	}
}

// scrape reads the series of a Prometheus text exposition at url.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s\n%s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatal(fmt.Errorf("%s: line %q: %w", url, line, err))
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
