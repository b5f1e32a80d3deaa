//go:build interop

package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
)

// TestServiceVia: the service moves a tree to an endpoint on a private
// network that it cannot reach (the route there is unreachable from its
// namespace), marked as reached only through the head node's endpoint,
// whose ferry gridftp --multicast forwards and keeps nothing. The copy is
// verified; the service refuses to list the internal endpoint, naming the
// head node.
func TestServiceVia(t *testing.T) {
	src, head, internal := newOverlay(t).servers(t)
	writeSet(t, src.root, 6)

	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("src", src)
	c.addEndpoint("head", head)
	c.addEndpoint("internal", internal, "--via", "alice#head")
	var ep api.Endpoint
	c.decode(&ep, "endpoint", "show", "internal")
	if ep.ViaDisplayName != "alice#head" {
		t.Fatalf("endpoint internal: via %q, want alice#head", ep.ViaDisplayName)
	}
	if out := c.ok("", "endpoint", "show", "internal"); !strings.Contains(out, "alice#head") {
		t.Errorf("ferry endpoint show does not name the head node:\n%s", out)
	}

	id := c.transfer("src:/set", "internal:/in/set", "-r", "--verify-checksum")
	task := c.succeeded(id, 2*time.Minute)
	if task.Files != 7 || task.FilesTransferred != 7 {
		t.Errorf("task: %d files, %d transferred, want 7", task.Files, task.FilesTransferred)
	}
	sameFiles(t, filepath.Join(src.root, "set"), filepath.Join(internal.root, "in", "set"), 7)
	if left, _ := os.ReadDir(head.root); len(left) != 0 {
		t.Errorf("the head node kept %d entries (%s...): it must only forward", len(left), left[0].Name())
	}

	r := c.run("", "ls", "internal:/")
	if r.code == 0 || !strings.Contains(r.stderr, "alice#head") {
		t.Errorf("ferry ls of the internal endpoint: want a refusal naming alice#head:\n%s", r)
	}
	r = c.run("", "transfer", "internal:/in/set", "src:/back", "-r")
	if r.code == 0 || !strings.Contains(r.stderr, "alice#head") {
		t.Errorf("a transfer from the internal endpoint: want a refusal naming alice#head:\n%s", r)
	}
}
