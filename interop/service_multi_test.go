//go:build interop

package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// TestServiceKill9Multi: a transfer to three destinations (ferry gridftp
// --multicast, which forward the files to one another) on a ferry server
// killed with SIGKILL mid-transfer and started again: every destination
// completes, and no destination is sent again a file recorded there
// before the kill.
func TestServiceKill9Multi(t *testing.T) {
	needFerry(t)
	root := t.TempDir()
	files := makeServiceTree(t, filepath.Join(root, "tree"), 150, 1)
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true, Args: []string{"--log-level", "debug"}})
	var dsts []*ferryServer
	for range 3 {
		d := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--multicast", "--log-level", "debug"}})
		// The tree's servers forward into directories that exist.
		if err := os.MkdirAll(d.Path("tree"), 0o755); err != nil {
			t.Fatal(err)
		}
		dsts = append(dsts, d)
	}
	s := startService(t, serviceConfig{Lease: time.Minute})
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src)
	args := []string{"src:/tree"}
	for i, d := range dsts {
		name := fmt.Sprintf("dst%d", i)
		c.addEndpoint(name, d)
		args = append(args, name+":/tree")
	}
	th := startThrottle(t, src, time.Millisecond, 40*time.Millisecond)
	id := c.transfer(append(args, "-r", "--label", "kill -9, three destinations")...)
	mid := c.waitFor(id, "files at every destination", 60*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
	th.freeze()
	if len(mid.Destinations) != 3 {
		t.Fatalf("task has %d destinations: %+v", len(mid.Destinations), mid.Destinations)
	}
	s.kill9()
	// What each destination had recorded when the service died.
	db, err := sqlstore.Open(context.Background(), filepath.Join(s.cfg.Data, "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := db.DestFiles(context.Background(), id, -1, "", 0, 1000)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	had := make([][]string, len(dsts))
	for _, r := range recs {
		if r.State == domain.FileSucceeded || r.State == domain.FileSkipped {
			had[r.Dest] = append(had[r.Dest], r.Dst)
		}
	}
	logEnd := make([]int, len(dsts))
	ids := make([]map[string]fileID, len(dsts))
	for i, d := range dsts {
		logEnd[i] = len(d.log.Bytes())
		ids[i] = fileIDs(t, d.Root(), had[i])
		t.Logf("destination %d had %d of %d files recorded", i, len(had[i]), files)
	}
	if slices.IndexFunc(had, func(h []string) bool { return len(h) > 0 && len(h) < files }) < 0 {
		t.Fatalf("no destination midway: %v", had)
	}
	restarted := len(s.log.Bytes())
	th.release()
	s.restart()
	for back := time.Now(); !s.claimedBy(id, restarted) && !s.tookBack(id, restarted); time.Sleep(20 * time.Millisecond) {
		if time.Since(back) > 5*time.Second {
			t.Fatalf("the restarted server did not take task %s back", id)
		}
	}
	task := c.succeeded(id, 2*time.Minute)
	if task.Files != int64(files) || task.FilesTransferred != int64(files) {
		t.Errorf("task counts %d files, %d transferred, %d skipped; want %d transferred", task.Files, task.FilesTransferred, task.FilesSkipped, files)
	}
	for i, d := range dsts {
		if err := compareTrees(src.Path("tree"), d.Path("tree")); err != nil {
			t.Fatalf("destination %d: %v", i, err)
		}
		if dd := task.Destinations[i]; dd.FilesTransferred+dd.FilesSkipped != int64(files) || dd.FilesFailed != 0 {
			t.Errorf("destination %d: %+v", i, dd)
		}
		again := stored(t, d.log.Bytes()[logEnd[i]:])
		after := fileIDs(t, d.Root(), had[i])
		for _, p := range had[i] {
			if again[p] > 0 || after[p] != ids[i][p] {
				t.Errorf("destination %d had %s recorded, then was sent it %d more times (%+v, was %+v)", i, p, again[p], after[p], ids[i][p])
			}
		}
		n := 0
		for _, k := range again {
			n += k
		}
		t.Logf("destination %d: %d files recorded before the kill, none sent again; %d STOR/ESTO after it", i, len(had[i]), n)
	}
	if ev := c.events(id); !strings.Contains(ev, "to 3 destinations") {
		t.Errorf("no STARTED event naming the destinations:\n%s", ev)
	}
}
