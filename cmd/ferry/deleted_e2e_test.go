package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ferry/service/api"
)

// TestCLIDeletedPaths runs a transfer with --delete-destination-extra
// through a service with a worker and real endpoint servers on loopback:
// every path the task deleted at the destination (more than one flush's
// worth) is listed, in the order it went, by ferry task show --deleted and
// the API's deleted_paths, and the DELETED events name every one.
func TestCLIDeletedPaths(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	aRoot, aURL := gridEndpoint(t)
	bRoot, bURL := gridEndpoint(t)
	writeFile(t, filepath.Join(aRoot, "src/keep.txt"), "keep")
	writeFile(t, filepath.Join(aRoot, "src/sub/in.txt"), "in")
	writeFile(t, filepath.Join(bRoot, "dst/keep.txt"), "old")
	var want []string
	for i := range 150 {
		name := fmt.Sprintf("dst/extra/f%03d", i)
		writeFile(t, filepath.Join(bRoot, name), "x")
		want = append(want, "/"+name)
	}
	writeFile(t, filepath.Join(bRoot, "dst/sub/gone"), "x")
	want = append(want, "/dst/extra/", "/dst/sub/gone")
	slices.Sort(want)
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", aURL)
	s.ok("", "endpoint", "add", "epB", "--server", bURL)
	id := strings.TrimSpace(s.ok("", "transfer", "-r", "--delete-destination-extra", "epA:/src", "epB:/dst"))
	if out := s.ok("", "task", "wait", id, "--timeout", "60"); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("task wait: %s", out)
	}
	wantFile(t, filepath.Join(bRoot, "dst/keep.txt"), "keep")
	wantFile(t, filepath.Join(bRoot, "dst/sub/in.txt"), "in")
	for _, rel := range []string{"dst/extra", "dst/sub/gone"} {
		if _, err := os.Stat(filepath.Join(bRoot, rel)); err == nil {
			t.Errorf("%s was not deleted", rel)
		}
	}

	var l api.DeletedPaths
	s.okJSON(&l, "task", "show", id, "--deleted")
	var listed []string
	for _, d := range l.Data {
		p := d.DestinationPath
		if d.Type == "dir" {
			p += "/"
		}
		if d.DataType != "deleted_path" || d.Type == "file" && d.Size != 1 || d.Time.IsZero() {
			t.Errorf("deleted path %+v", d)
		}
		listed = append(listed, p)
	}
	// The order the paths went in is the order the destination's server
	// listed them (readdir order): the lists are compared sorted, and
	// the events with the list.
	if sorted := slices.Sorted(slices.Values(listed)); l.DataType != "deleted_paths" || !slices.Equal(sorted, want) {
		t.Errorf("task show --deleted -F json: %s %q\nwant %q", l.DataType, sorted, want)
	}
	out := s.ok("", "task", "show", id, "--deleted")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != len(want)+1 ||
		!strings.Contains(lines[1], listed[0]) || !strings.Contains(lines[len(lines)-1], listed[len(listed)-1]) {
		t.Errorf("task show --deleted:\n%s", out)
	}

	var evs api.EventList
	s.okJSON(&evs, "task", "events", id)
	var told []string
	for _, e := range evs.Data {
		if e.Code != "DELETED" {
			continue
		}
		var d struct{ Paths []string }
		if err := json.Unmarshal([]byte(e.Details), &d); err != nil || !strings.HasPrefix(e.Description, "deleted ") {
			t.Errorf("DELETED event %+v: %v", e, err)
		}
		told = append(told, d.Paths...)
	}
	if !slices.Equal(told, listed) {
		t.Errorf("DELETED events name %q\nwant %q", told, listed)
	}
}
