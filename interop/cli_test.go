package interop

import (
	"strings"
	"testing"
)

// TestCLIWhoami runs ferry whoami logged in (text and -F json) and after
// ferry logout: "not logged in", exit status 4.
func TestCLIWhoami(t *testing.T) {
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	if out := c.ok("", "whoami"); out != "alice at "+svc.URL()+"\n" {
		t.Errorf("ferry whoami printed %q", out)
	}
	var doc struct{ Username, URL, Kind string }
	c.decode(&doc, "whoami")
	if doc.Username != "alice" || doc.URL != svc.URL() || doc.Kind != "api" {
		t.Errorf("ferry whoami -F json: %+v", doc)
	}
	c.ok("", "logout")
	if r := c.run("", "whoami"); r.code != 4 || !strings.Contains(r.stderr, "not logged in") {
		t.Errorf("whoami after logout: want exit 4, not logged in:\n%s", r)
	}
}
