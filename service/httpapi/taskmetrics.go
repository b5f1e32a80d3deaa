package httpapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/service/domain"
)

// taskStatuses are the statuses ferry_tasks always reports, 0 when no task
// has them, so that dashboards see every series from the start.
var taskStatuses = []string{domain.StatusActive, domain.StatusInactive, domain.StatusSucceeded, domain.StatusFailed}

// tasksDesc describes ferry_tasks.
var tasksDesc = prometheus.NewDesc("ferry_tasks", "Tasks in the store by status (every process sharing the store reports the same).", []string{"status"}, nil)

// taskCollector reports the store's tasks by status at each scrape: one
// aggregate query (domain.TaskService.TaskCounts), bounded by scrapeWithin.
type taskCollector struct {
	tasks domain.TaskService
	log   *slog.Logger
}

// scrapeWithin bounds the store query of one scrape.
const scrapeWithin = 5 * time.Second

func (c taskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

// Collect reports nothing when the store does not answer: a scrape still
// serves the other metrics, and the gap shows on the dashboard.
func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeWithin)
	defer cancel()
	n, err := c.tasks.TaskCounts(ctx)
	if err != nil {
		c.log.Warn("metrics: count tasks", "err", err)
		return
	}
	for _, st := range taskStatuses {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n[st]), st)
	}
}
