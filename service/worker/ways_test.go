package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/domain"
	"ferry/storage/posix"
)

// TestSpreadOverServers: the servers of an endpoint serve one storage, so
// a large file's chunks go to all of them, and the task's events say
// which way it moved.
func TestSpreadOverServers(t *testing.T) {
	f := newFixture(t)
	p, err := posix.New(f.dst.root)
	if err != nil {
		t.Fatal(err)
	}
	second := &counting{Driver: p, opens: map[string]int{}, creates: map[string]int{}}
	addr := servertest.Serve(t, &server.Server{FS: second, Auth: servertest.Users{"alice": "pw"}, DataTimeout: 5 * time.Second})
	f.dstEP.Servers = append(f.dstEP.Servers, "ftp://"+addr)
	if err := f.store.UpdateEndpoint(context.Background(), f.dstEP); err != nil {
		t.Fatal(err)
	}
	data := random(64<<20 + 12345) // at the engine's stripe size
	write(t, filepath.Join(f.src.root, "big"), data)
	task := f.submit(domain.Options{}, domain.Item{Src: "/big", Dst: "/big"})
	serve(t, f.worker("w1", f.store, &spy{}))
	if got := f.wait(task.ID, 20*time.Second, finished); got.Status != domain.StatusSucceeded {
		t.Fatalf("task %+v", got)
	}
	if got, err := os.ReadFile(filepath.Join(f.dst.root, "big")); err != nil || string(got) != string(data) {
		t.Fatalf("the copy differs (%v)", err)
	}
	e, ok := f.event(task.ID, domain.EventWay)
	if !ok || !strings.Contains(e.Description, "spread for files of 64 MiB or more") || !strings.Contains(e.Details, `"way":"spread"`) {
		t.Errorf("WAY event %+v", e)
	}
	if f.dst.fs.created("/big") == 0 || second.created("/big") == 0 {
		t.Errorf("chunks written through the first server %d times, the second %d; want both", f.dst.fs.created("/big"), second.created("/big"))
	}
}
