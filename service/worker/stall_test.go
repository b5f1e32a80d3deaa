package worker_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp/client"
	"ferry/internal/synclevel"
	"ferry/service/domain"
)

// TestStallIsAnEvent: the source's data stops (its reads wait) while both
// servers answer. The engine declares the transfer stalled, the task
// counts a fault and its history tells it; once data flows again the task
// succeeds with the file whole.
func TestStallIsAnEvent(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 1, 32<<20)
	f.src.fs.rate.Store(16 << 20) // in flight long enough to be held
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{stall: time.Second})
	serve(t, w)
	f.wait(task.ID, 10*time.Second, func(t domain.Task) bool { return t.BytesTransferred > 0 })
	held := make(chan struct{})
	f.src.fs.hold.Store(&held)
	release := func() {
		if f.src.fs.hold.CompareAndSwap(&held, nil) {
			close(held)
		}
	}
	t.Cleanup(release)
	f.wait(task.ID, 20*time.Second, func(t domain.Task) bool { return t.Faults > 0 })
	release()
	got := f.wait(task.ID, 20*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
	var faults []string
	for _, e := range f.events(task.ID) {
		if e.Code == domain.EventFault {
			faults = append(faults, e.Description+" "+e.Details)
		}
	}
	if !strings.Contains(strings.Join(faults, "\n"), client.ErrStalled.Error()) {
		t.Fatalf("no FAULT event tells the stall: %q", faults)
	}
}
