package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"ferry/internal/pgtest"
	"ferry/service/domain"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// stores are the two kinds of database a service runs on.
var stores = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "ferry.db") }},
	{"PostgreSQL", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// TestCancelStopsTheData cancels a running task, and one file of another,
// through a second handle on the database, as another service process
// would. Heartbeats are a minute apart, so only the database's signal
// can reach the worker: the data must stop within about a second (the
// source reads at 16 MiB/s), the task end CANCELED, and nothing count as
// a fault.
func TestCancelStopsTheData(t *testing.T) {
	const rate = 16 << 20
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, one := range []bool{false, true} {
				name := map[bool]string{false: "task", true: "one file"}[one]
				t.Run(name, func(t *testing.T) {
					f := newFixtureOn(t, st.dsn(t))
					write(t, filepath.Join(f.src.root, "tree", "big"), random(64<<20))
					write(t, filepath.Join(f.src.root, "tree", "small"), random(1<<20))
					f.src.fs.rate.Store(rate)
					task := f.submit(domain.Options{SyncLevel: domain.SyncNone}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
					w := f.worker("w1", f.store, &spy{})
					w.Lease, w.HeartbeatEvery = 3*time.Minute, time.Minute
					serve(t, w)
					f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return f.dst.fs.written.Load() >= 4<<20 })

					other := f.open()
					asked := time.Now()
					var err error
					if one {
						err = other.CancelFile(context.Background(), f.user.ID, task.ID, "/tree/big")
					} else {
						_, err = other.RequestCancel(context.Background(), f.user.ID, task.ID, time.Now())
					}
					if err != nil {
						t.Fatal(err)
					}
					before := f.dst.fs.written.Load()
					// Wait until the writes stop, then measure what came after the cancel.
					for last := int64(-1); ; time.Sleep(300 * time.Millisecond) {
						n := f.dst.fs.written.Load()
						if n == last {
							break
						}
						last = n
						if time.Since(asked) > 10*time.Second {
							t.Fatalf("data still moving %v after the cancel", time.Since(asked))
						}
					}
					after := f.dst.fs.written.Load() - before
					t.Logf("%.1f MiB written after the cancel", float64(after)/(1<<20))
					if after > rate*3/2 {
						t.Errorf("%d MiB moved after the cancel; at %d MiB/s, want about a second's worth", after>>20, rate>>20)
					}
					got := f.wait(task.ID, 5*time.Second, finished)
					if one {
						if got.Status != domain.StatusSucceeded || got.FilesTransferred != 1 {
							t.Errorf("task %s, %+v; want SUCCEEDED with the small file", got.Status, got.Counters)
						}
						files, _, _ := f.store.Files(context.Background(), task.ID, domain.FileCanceled, 0, 10)
						if len(files) != 1 || files[0].Src != "/tree/big" {
							t.Errorf("canceled file records %+v", files)
						}
					} else if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != "CANCELED" {
						t.Errorf("task %s %+v, want FAILED CANCELED", got.Status, got.FatalError)
					}
					if got.Faults != 0 {
						t.Errorf("%d faults counted; a cancel is not one", got.Faults)
					}
					for _, e := range f.events(task.ID) {
						if e.Code == domain.EventFault {
							t.Errorf("event %s: %s", e.Code, e.Description)
						}
					}
				})
			}
		})
	}
}

// TestCancelAsTheLastFileEnds: a cancel that arrives while the engine
// finishes the last file ends the task CANCELED, as the user was told.
func TestCancelAsTheLastFileEnds(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.src.root, "one"), random(1000))
	task := f.submit(domain.Options{SyncLevel: domain.SyncNone}, domain.Item{Src: "/one", Dst: "/one"})
	late := &spy{after: func() {
		if _, err := f.open().RequestCancel(context.Background(), f.user.ID, task.ID, time.Now()); err != nil {
			t.Error(err)
		}
	}}
	w := f.worker("w1", f.store, late)
	w.HeartbeatEvery = time.Minute
	serve(t, w)
	got := f.wait(task.ID, 5*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != "CANCELED" {
		t.Fatalf("task %s %+v, want FAILED CANCELED", got.Status, got.FatalError)
	}
}
