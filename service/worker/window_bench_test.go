package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// BenchmarkResumeHeld measures what a worker holds of a task that
// recorded dirs×perDir files when it resumes and the engine asks about
// the files of one directory: the heap of the window (skip) against that
// of every recorded path in a set, as the worker held them before issue
// 31. Run it with `go test -run '^$' -bench ResumeHeld -benchtime 1x
// ./service/worker/` (nothing is asserted).
func BenchmarkResumeHeld(b *testing.B) {
	const dirs, perDir = 1000, 1000
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(b.TempDir(), "ferry.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var u domain.User
	if err := store.CreateUser(ctx, &u); err != nil {
		b.Fatal(err)
	}
	task := domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: "s", DstEndpoint: "d"}
	if err := store.CreateTask(ctx, &task); err != nil {
		b.Fatal(err)
	}
	if _, err := store.Claim(ctx, "w", time.Now(), time.Hour, 0); err != nil {
		b.Fatal(err)
	}
	path := func(i int) string { return fmt.Sprintf("/home/alice/dataset/run-%04d/event-%07d.root", i/perDir, i) }
	var batch domain.Batch
	for i := range dirs * perDir {
		batch.Files = append(batch.Files, domain.File{Src: path(i), Dst: path(i), Size: 1, State: domain.FileSucceeded})
		if len(batch.Files) == 500 {
			if err := store.Progress(ctx, task.ID, "w", batch); err != nil {
				b.Fatal(err)
			}
			batch.Files = batch.Files[:0]
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.Run("window", func(b *testing.B) {
		for range b.N {
			before := heap()
			p := newProgress(&Worker{Store: store}, task)
			p.begin()
			for i := range perDir {
				if !p.skip(ctx, path(7*perDir+i), "") {
					b.Fatalf("%s: not left out", path(7*perDir+i))
				}
			}
			b.ReportMetric(float64(heap()-before), "heap-bytes")
			runtime.KeepAlive(p)
		}
	})
	b.Run("every-path", func(b *testing.B) {
		for range b.N {
			before := heap()
			all := map[string]bool{}
			for marker := int64(0); ; {
				files, next, err := store.Files(ctx, task.ID, "", marker, 1000)
				if err != nil {
					b.Fatal(err)
				}
				for _, f := range files {
					all[f.Src] = true
				}
				if marker = next; marker == 0 {
					break
				}
			}
			b.ReportMetric(float64(heap()-before), "heap-bytes")
			runtime.KeepAlive(all)
		}
	})
}
