package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"ferry/service/domain"
)

// reads is a store that counts the file records it gives the worker.
type reads struct {
	domain.Store
	n atomic.Int64
}

func (r *reads) RecordedIn(ctx context.Context, taskID, dir string, fn func(name, dst string)) error {
	return r.Store.RecordedIn(ctx, taskID, dir, func(name, dst string) {
		r.n.Add(1)
		fn(name, dst)
	})
}

func (r *reads) Files(ctx context.Context, taskID, state string, marker int64, limit int) ([]domain.File, int64, error) {
	fs, next, err := r.Store.Files(ctx, taskID, state, marker, limit)
	r.n.Add(int64(len(fs)))
	return fs, next, err
}

// TestResumeReadsWhatItMeets resumes a task, after its worker was killed,
// that recorded 50,000 files before, in directories the source no longer
// has, and two of the five files of the one directory it has: the worker
// reads the records of the directories the run meets, not every record
// of the task (which it would hold for the whole run), and sends the
// three files not recorded, and only those.
func TestResumeReadsWhatItMeets(t *testing.T) {
	f := newFixture(t)
	f.files("tree/new", 5, 100)
	task := f.submit(domain.Options{}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	ctx := context.Background()
	if _, err := f.store.Claim(ctx, "killed", time.Now(), time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	var b domain.Batch
	record := func(fl domain.File) {
		b.Files = append(b.Files, fl)
		if len(b.Files) == 500 {
			if err := f.store.Progress(ctx, task.ID, "killed", b); err != nil {
				t.Fatal(err)
			}
			b.Files = nil
		}
	}
	for i := range 50_000 {
		p := fmt.Sprintf("/tree/old/d%03d/f%03d", i/500, i%500)
		record(domain.File{Src: p, Dst: p, Size: 100, State: domain.FileSucceeded})
	}
	record(domain.File{Src: "/tree/new/f000", Dst: "/tree/new/f000", Size: 100, State: domain.FileSucceeded})
	record(domain.File{Src: "/tree/new/f001", Dst: "/tree/new/f001", Size: 100, State: domain.FileSkipped})
	if err := f.store.Progress(ctx, task.ID, "killed", b); err != nil {
		t.Fatal(err)
	}
	store := &reads{Store: f.store}
	serve(t, f.worker("w", store, &spy{}))
	got := f.wait(task.ID, 20*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %+v", got)
	}
	if n := store.n.Load(); n > 100 {
		t.Errorf("the worker read %d file records of the task to resume it; the directories it met have 2", n)
	}
	for i := range 5 {
		p := fmt.Sprintf("/tree/new/f%03d", i)
		if n, want := f.src.fs.count(p), map[bool]int{true: 0, false: 1}[i < 2]; n != want {
			t.Errorf("%s sent %d times, want %d", p, n, want)
		}
		a, _ := os.ReadFile(filepath.Join(f.src.root, p))
		if b, err := os.ReadFile(filepath.Join(f.dst.root, p)); i >= 2 && !bytes.Equal(a, b) {
			t.Errorf("%s at the destination: %v", p, err)
		}
	}
}
