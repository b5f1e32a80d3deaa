package worker_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/domain"
	"ferry/storage"
	"ferry/storage/sink"
	"ferry/storage/synthetic"
)

// slowStore is a store that takes file records (Progress) only once the
// worker had to wait for it, as a database slower than the transfers
// makes it, or once every file of the task has its record; it notes the
// most records the worker held for it meanwhile.
type slowStore struct {
	domain.Store
	t       *testing.T
	reg     *prometheus.Registry // the worker's metrics
	files   int64                // records the task makes in all
	limit   int64                // held records past which the worker holds too many
	waits   int64                // the worker's waits seen so far
	stored  int64                // records taken
	most    atomic.Int64         // the most records held, seen at a Progress
	tooMany atomic.Bool
}

// metric is the value of the worker's metric name.
func (s *slowStore) metric(name string) int64 {
	out := gather(s.t, s.reg, name)
	v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(out, name)), 64)
	return int64(v)
}

func (s *slowStore) Progress(ctx context.Context, taskID, worker string, b domain.Batch) error {
	if len(b.Files) > 0 {
		for {
			held := s.metric("ferry_worker_records_held")
			if held > s.most.Load() {
				s.most.Store(held)
			}
			if held > s.limit {
				s.tooMany.Store(true)
				break
			}
			if w := s.metric("ferry_worker_record_waits_total"); w > s.waits {
				s.waits = w
				break
			}
			if s.stored+held >= s.files {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
	}
	err := s.Store.Progress(ctx, taskID, worker, b)
	if err == nil {
		s.stored += int64(len(b.Files))
	}
	return err
}

// syntheticEndpoint serves driver to alice (password pw) as a ferry
// GridFTP server.
func syntheticEndpoint(t *testing.T, driver storage.Driver) string {
	t.Helper()
	return "ftp://" + servertest.Serve(t, &server.Server{FS: driver, Auth: servertest.Users{"alice": "pw"}, DataTimeout: 5 * time.Second})
}

// TestRecordsHeldBounded runs a verified task of 20,000 generated files
// into a sink with a database slower than the transfers: the worker holds
// a bounded number of file records for the database (the transfers wait
// for it), not one for every file done, and the task ends with every file
// recorded.
func TestRecordsHeldBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 files")
	}
	const files = 20_000
	f := newFixture(t)
	src, err := synthetic.New(synthetic.Tree{Files: files, Size: 10, PerDir: 1000, Fan: 10})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sink.Parse("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var eps []domain.Endpoint
	for _, d := range []storage.Driver{src, dst} {
		ep := domain.Endpoint{OwnerID: f.user.ID, Name: "synthetic-" + strconv.Itoa(len(eps)), Servers: []string{syntheticEndpoint(t, d)},
			Auth: domain.AuthPassword}
		if err := f.store.CreateEndpoint(ctx, &ep); err != nil {
			t.Fatal(err)
		}
		f.activate(ep, domain.Login{User: "alice", Password: "pw"}, time.Hour)
		eps = append(eps, ep)
	}
	task := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: eps[0].ID, DstEndpoint: eps[1].ID,
		Items: []domain.Item{{Src: "/", Dst: "/out/", Recursive: true}}, Options: domain.Options{VerifyChecksum: true}}
	if err := f.store.CreateTask(ctx, &task); err != nil {
		t.Fatal(err)
	}
	store := &slowStore{Store: f.store, t: t, reg: prometheus.NewRegistry(), files: files, limit: files / 4}
	w := f.worker("w", store, &spy{})
	store.reg.MustRegister(w.Collector())
	serve(t, w)
	got := f.wait(task.ID, time.Minute, finished)
	if got.Status != domain.StatusSucceeded || got.FilesTransferred != files {
		t.Fatalf("task %s, %d of %d files transferred: %+v", got.Status, got.FilesTransferred, files, got)
	}
	if store.tooMany.Load() {
		t.Errorf("the worker held %d file records for the database at once (more than %d of the task's %d): it keeps every file done until the database takes it",
			store.most.Load(), store.limit, files)
	}
	t.Logf("at most %d records held; the transfers waited for the database %d times", store.most.Load(), store.waits)
}
