package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/engine"
	"ferry/internal/synclevel"
	"ferry/service/domain"
)

// TestMetrics runs a task to its end and checks that the worker's
// collector counts its files, bytes and faults, and reports its lease and
// endpoints while it runs and none after.
func TestMetrics(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.src.root, "data", "a"), random(1000))
	write(t, filepath.Join(f.src.root, "data", "b"), random(5000))
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/data", Dst: "/out/data", Recursive: true})
	e := &spy{}
	w := f.worker("w1", f.store, e)
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.Collector())
	src, dst := "alice#"+f.srcEP.Name, "alice#"+f.dstEP.Name
	during := make(chan string, 1)
	e.after = func() {
		during <- gather(t, reg, "ferry_worker_leases", "ferry_endpoint_active_tasks")
	}
	// Two retried faults before the engine runs, of two classes.
	w.Engine = func(ctx context.Context, s, d engine.Endpoint, items []engine.Item, o engine.Options, rep engine.Reporter) (engine.Result, error) {
		rep.Fault("/data/a", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, time.Millisecond)
		rep.Fault("/data/b", errors.New("something else"), time.Millisecond)
		return e.copy(ctx, s, d, items, o, rep)
	}
	serve(t, w)
	if got := f.wait(task.ID, 10*time.Second, finished); got.Status != domain.StatusSucceeded {
		t.Fatalf("task %+v", got)
	}
	want := fmt.Sprintf("ferry_endpoint_active_tasks{endpoint=%q} 1\nferry_endpoint_active_tasks{endpoint=%q} 1\nferry_worker_leases 1\n", src, dst)
	if got := <-during; got != want {
		t.Errorf("while the task runs:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range []struct {
		name, want string
	}{
		{"ferry_worker_bytes_total", "ferry_worker_bytes_total 6000\n"},
		{"ferry_worker_files_total", "ferry_worker_files_total{result=\"failed\"} 0\nferry_worker_files_total{result=\"skipped\"} 0\nferry_worker_files_total{result=\"succeeded\"} 2\n"},
		{"ferry_worker_faults_total", "ferry_worker_faults_total{class=\"CONNECT_FAILED\"} 1\nferry_worker_faults_total{class=\"FAILED\"} 1\n"},
		{"ferry_worker_leases", "ferry_worker_leases 0\n"},
		{"ferry_endpoint_active_tasks", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got string
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if got = gather(t, reg, c.name); got == c.want {
					return
				}
			}
			t.Errorf("after the task:\n%s\nwant:\n%s", got, c.want)
		})
	}
}

// gather is the series of the metrics names of reg, one "name{labels}
// value" a line, sorted.
func gather(t *testing.T, reg *prometheus.Registry, names ...string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			b.WriteString(mf.GetName())
			if len(labels) > 0 {
				b.WriteString("{" + strings.Join(labels, ",") + "}")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, " %g\n", v)
		}
	}
	return b.String()
}
