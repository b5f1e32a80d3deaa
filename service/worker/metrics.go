package worker

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/service/domain"
)

// stats is what a worker has moved and met, for Collector: counted per
// flush of a task's progress and per fault, never per block.
type stats struct {
	bytes                      atomic.Int64
	succeeded, skipped, failed atomic.Int64 // files
	recordWaits                atomic.Int64 // times a run waited for the store to take its file records
	mu                         sync.Mutex
	faults                     map[string]int64 // by class (failure.code): a few values
}

// moved counts what one flush persisted.
func (s *stats) moved(d domain.Counters) {
	s.bytes.Add(d.BytesTransferred)
	s.succeeded.Add(d.FilesTransferred)
	s.skipped.Add(d.FilesSkipped)
	s.failed.Add(d.FilesFailed)
}

// fault counts a fault of class.
func (s *stats) fault(class string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults == nil {
		s.faults = map[string]int64{}
	}
	s.faults[class]++
}

var (
	bytesDesc  = prometheus.NewDesc("ferry_worker_bytes_total", "Bytes the worker's tasks moved, as their progress is persisted.", nil, nil)
	filesDesc  = prometheus.NewDesc("ferry_worker_files_total", "Files the worker's tasks finished, by result (succeeded, skipped, failed).", []string{"result"}, nil)
	faultsDesc = prometheus.NewDesc("ferry_worker_faults_total", "Retried faults of the worker's tasks, by class (the task nice status the fault means, or FAILED).", []string{"class"}, nil)
	leasesDesc = prometheus.NewDesc("ferry_worker_leases", "Tasks the worker holds a lease on.", nil, nil)
	loadDesc   = prometheus.NewDesc("ferry_endpoint_active_tasks", "Tasks the worker runs per endpoint (owner#name), for endpoints with a running task only.", []string{"endpoint"}, nil)
	heldDesc   = prometheus.NewDesc("ferry_worker_records_held", "File records the worker's running tasks made and the database does not have yet.", nil, nil)
	waitsDesc  = prometheus.NewDesc("ferry_worker_record_waits_total", "Times a task's transfers paused until the database took the file records waiting for it (see maxWaiting).", nil, nil)
)

// Collector reports the worker's metrics for Prometheus: bytes, files,
// faults and waits for the database counted so far, and, at each scrape,
// its leases, how many of its running tasks use each endpoint and the
// file records they hold for the database. Endpoints are labelled by display
// name, and only while a task of this worker uses them, so that the series
// are at most twice Tasks (a relay aside).
func (w *Worker) Collector() prometheus.Collector {
	w.init()
	return collector{w}
}

type collector struct{ w *Worker }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bytesDesc, filesDesc, faultsDesc, leasesDesc, loadDesc, heldDesc, waitsDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := &c.w.stats
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(s.bytes.Load()))
	for result, n := range map[string]*atomic.Int64{"succeeded": &s.succeeded, "skipped": &s.skipped, "failed": &s.failed} {
		ch <- prometheus.MustNewConstMetric(filesDesc, prometheus.CounterValue, float64(n.Load()), result)
	}
	s.mu.Lock()
	for class, n := range s.faults {
		ch <- prometheus.MustNewConstMetric(faultsDesc, prometheus.CounterValue, float64(n), class)
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(waitsDesc, prometheus.CounterValue, float64(s.recordWaits.Load()))
	leases, load, held := c.w.load()
	ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(leases))
	for ep, n := range load {
		ch <- prometheus.MustNewConstMetric(loadDesc, prometheus.GaugeValue, float64(n), ep)
	}
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(held))
}

// load is how many tasks the worker holds, how many of those use each
// endpoint, by display name, and the file records they hold for the store.
func (w *Worker) load() (leases int, byEndpoint map[string]int, held int) {
	w.mu.Lock()
	runs := make([]*run, 0, len(w.running))
	for _, r := range w.running {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	byEndpoint = map[string]int{}
	for _, r := range runs {
		if r == nil {
			continue // starting: its endpoints are not known yet
		}
		r.mu.Lock()
		seen := map[string]bool{}
		for _, ep := range r.eps {
			if name := ep.DisplayName(); !seen[name] {
				seen[name] = true
				byEndpoint[name]++
			}
		}
		r.mu.Unlock()
		held += r.p.held()
	}
	return len(runs), byEndpoint, held
}
