package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ferry/gridftp/server"
)

// The metrics of ferry gridftp --metrics-listen.
var (
	gfSessionsDesc  = prometheus.NewDesc("ferry_gridftp_sessions", "Control sessions open now.", nil, nil)
	gfSessionsTotal = prometheus.NewDesc("ferry_gridftp_sessions_total", "Control sessions admitted.", nil, nil)
	gfBytesDesc     = prometheus.NewDesc("ferry_gridftp_bytes_total", "File data of finished transfers, by direction (in: received, out: sent).", []string{"direction"}, nil)
	gfTransfersDesc = prometheus.NewDesc("ferry_gridftp_transfers_total", "File transfers by outcome (succeeded, failed, aborted).", []string{"outcome"}, nil)
	gfErrorsDesc    = prometheus.NewDesc("ferry_gridftp_errors_total", "Error replies by class (transient: 4xx, permanent: 5xx).", []string{"class"}, nil)
)

// gridftpCollector exports a server's Stats, read at each scrape.
type gridftpCollector struct{ srv *server.Server }

func (c gridftpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gfSessionsDesc, gfSessionsTotal, gfBytesDesc, gfTransfersDesc, gfErrorsDesc} {
		ch <- d
	}
}

func (c gridftpCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.srv.Stats
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	ch <- prometheus.MustNewConstMetric(gfSessionsDesc, prometheus.GaugeValue, float64(c.srv.Sessions()))
	counter(gfSessionsTotal, s.Sessions.Load())
	counter(gfBytesDesc, s.BytesIn.Load(), "in")
	counter(gfBytesDesc, s.BytesOut.Load(), "out")
	counter(gfTransfersDesc, s.Succeeded.Load(), "succeeded")
	counter(gfTransfersDesc, s.Failed.Load(), "failed")
	counter(gfTransfersDesc, s.Aborted.Load(), "aborted")
	counter(gfErrorsDesc, s.Transient.Load(), "transient")
	counter(gfErrorsDesc, s.Permanent.Load(), "permanent")
}

// serveMetrics gives srv Stats and serves them, with the Go and process
// metrics, at http://addr/metrics until ctx ends.
func serveMetrics(ctx context.Context, addr string, srv *server.Server, log *slog.Logger, out io.Writer) error {
	srv.Stats = &server.Stats{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), gridftpCollector{srv})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { hs.Close() })
	fmt.Fprintf(out, "ferry gridftp: metrics on http://%s/metrics\n", ln.Addr())
	return nil
}
