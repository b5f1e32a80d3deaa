package main

import (
	"path/filepath"
	"strings"
	"testing"

	"ferry/service/api"
)

// TestCLIBookmarks: bookmark create, list, show (whose ENDPOINT_ID:PATH
// other commands take), rename and delete, as a user would script them.
func TestCLIBookmarks(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "proj/runs/r1.txt"), "r1")
	s.login()
	bob := s.asUser("bob")
	bob.ok("", "endpoint", "add", "private", "--server", url)
	var ep api.Endpoint
	s.okJSON(&ep, "endpoint", "add", "lab", "--server", url)

	if out := s.ok("", "bookmark", "create", "my runs", "lab:/proj/runs/"); !strings.Contains(out, "alice#lab") || !strings.Contains(out, "/proj/runs/") {
		t.Fatalf("bookmark create:\n%s", out)
	}
	s.ok("", "bookmark", "create", "top", "alice#lab:/")
	shown := strings.TrimSpace(s.ok("", "bookmark", "show", "my runs"))
	if shown != ep.ID+":/proj/runs/" {
		t.Fatalf("bookmark show: %q, want %q", shown, ep.ID+":/proj/runs/")
	}
	if out := s.ok("", "ls", shown); out != "r1.txt\n" {
		t.Fatalf("ls of what bookmark show printed:\n%s", out)
	}
	if out := s.ok("", "bookmark", "list", "-F", "unix"); out != "my runs\t"+bookmarkID(t, s, "my runs")+"\talice#lab\t/proj/runs/\ntop\t"+bookmarkID(t, s, "top")+"\talice#lab\t/\n" {
		t.Fatalf("bookmark list -F unix:\n%s", out)
	}
	s.fails(exitFailure, `you have a bookmark named "top" already`, "bookmark", "create", "top", "lab:/proj")
	s.fails(exitFailure, `no endpoint "bob#private"`, "bookmark", "create", "theirs", "bob#private:/")
	s.fails(exitUsage, "no path", "bookmark", "create", "nopath", "lab")

	s.ok("", "bookmark", "rename", "my runs", "runs")
	s.fails(exitFailure, `you have no bookmark "my runs"`, "bookmark", "show", "my runs")
	s.fails(exitFailure, `you have a bookmark named "top" already`, "bookmark", "rename", "runs", "top")
	id := bookmarkID(t, s, "runs")
	if out := strings.TrimSpace(s.ok("", "bookmark", "show", id)); out != ep.ID+":/proj/runs/" {
		t.Fatalf("bookmark show by ID: %q", out)
	}
	if out := s.ok("", "bookmark", "list", "-F", "unix"); strings.Contains(out, "my runs") || !strings.Contains(out, "runs\t"+id) {
		t.Fatalf("bookmark list after rename:\n%s", out)
	}
	if out := bob.ok("", "bookmark", "list", "-F", "unix"); out != "" {
		t.Fatalf("bob sees alice's bookmarks:\n%s", out)
	}
	bob.fails(exitFailure, `you have no bookmark "runs"`, "bookmark", "show", "runs")
	s.ok("", "bookmark", "delete", "runs")
	s.fails(exitFailure, `you have no bookmark "runs"`, "bookmark", "delete", "runs")
	if out := s.ok("", "bookmark", "list", "-F", "unix"); !strings.HasPrefix(out, "top\t") || strings.Count(out, "\n") != 1 {
		t.Fatalf("bookmark list after delete:\n%s", out)
	}
}

// bookmarkID is the ID of the bookmark name, as bookmark show -F json
// prints it.
func bookmarkID(t *testing.T, s *service, name string) string {
	t.Helper()
	var b api.Bookmark
	s.okJSON(&b, "bookmark", "show", name)
	return b.ID
}
