//go:build interop

package interop

// The tuner's view of the link, through the ferry binary: a server on this
// host is never behind a wide-area link, however late a reply comes.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// lateLogin holds each USER command 20 ms (controlRelay): a login's round
// trip as long as a server makes it that forks or is busy, as long as a
// wide-area link's, by that one sample.
func lateLogin(line string) {
	if strings.HasPrefix(line, "USER ") {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCopyLinkJudgedLocal: ferry copy -v from a ferry server whose
// logins' replies come 20 ms late (lateLogin), and from GCT (which forks
// a process for each session), to a local directory: both ends are on
// this host, a local link whatever the round trips, and -v says so.
func TestCopyLinkJudgedLocal(t *testing.T) {
	needTools(t)
	srv := startFerry(t)
	if err := os.WriteFile(srv.Path("f.dat"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	gct := startGCT(t)
	if err := os.WriteFile(gct.Path("f.dat"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, url string }{
		{"ferry, every login's reply late", "ftp://" + controlRelay(t, srv.Addr(), lateLogin) + "/f.dat"},
		{"gct", gct.URL("f.dat")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCopy(t, "-v", tc.url, filepath.Join(t.TempDir(), "f.dat"))
			checkSummary(t, r, 1, 1, 0)
			if !strings.Contains(r.stderr, "over a local link (both ends on the same host)") {
				t.Errorf("want the link judged local, both ends on this host:\n%s", r.stderr)
			}
		})
	}
}

// TestServiceLinkJudgedLocal: a service task between two ferry servers on
// this host, the source's logins 20 ms late (lateLogin), is planned for a
// local link, and its STARTED event's why says that both ends are on the
// same host.
func TestServiceLinkJudgedLocal(t *testing.T) {
	needTools(t)
	src, dst := startFerry(t), startFerry(t)
	if err := os.WriteFile(src.Path("f.dat"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.ok("", "endpoint", "add", "src", "--server", "ftp://"+controlRelay(t, src.Addr(), lateLogin))
	c.addEndpoint("dst", dst)
	id := c.transfer("src:/f.dat", "dst:/f.dat", "--label", "late logins")
	c.succeeded(id, time.Minute)
	var events api.EventList
	c.decode(&events, "task", "events", id)
	var why []string
	for _, e := range events.Data {
		var d struct{ Why string }
		if e.Code == domain.EventStarted && json.Unmarshal([]byte(e.Details), &d) == nil {
			why = append(why, d.Why)
		}
	}
	if len(why) != 1 || !strings.Contains(why[0], "over a local link (both ends on the same host)") {
		t.Errorf("STARTED events' why %q; want one, the link local, both ends on this host", why)
	}
}
