//go:build interop

package interop

import (
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// TestServiceStriped: the service moves a tree with a large file between
// two ferry striped endpoints (a front end and 2 data movers each): the
// large file goes striped, and the task's WAY event says so; ferry
// endpoint show lists an endpoint's movers, up, and one down with why
// once it is killed, after which the endpoint still takes a task through
// the mover left.
func TestServiceStriped(t *testing.T) {
	needFerry(t)
	src, dst := startFerryStriped(t, 2), startFerryStriped(t, 2)
	const big = 72 << 20 // over the engine's stripe size, 64 MiB
	writeRandomFile(t, src.Path("run/big.dat"), big)
	makeRandomFiles(t, src.Path("run/small"), "f-%d.dat", 4, 10<<10, 200<<10)
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)

	movers := func(ep string) api.ServerState {
		t.Helper()
		var doc struct {
			ServerState *api.ServerStateList `json:"server_state"`
		}
		c.decode(&doc, "endpoint", "show", ep)
		if doc.ServerState == nil || len(doc.ServerState.Data) != 1 {
			t.Fatalf("ferry endpoint show %s: server state %+v, want one server", ep, doc.ServerState)
		}
		return doc.ServerState.Data[0]
	}
	st := movers("dst")
	if !st.Up || st.Stripes != 2 || len(st.Movers) != 2 || !st.Movers[0].Up || !st.Movers[1].Up {
		t.Fatalf("dst before the transfer: %+v, want up, 2 stripes, 2 movers up", st)
	}
	for i, m := range st.Movers {
		if m.Index != i || m.Address != dst.addrs[i] {
			t.Errorf("mover %d: %+v, want index %d at %s", i, m, i, dst.addrs[i])
		}
	}
	text := c.ok("", "endpoint", "show", "dst")
	for _, want := range []string{"up, striped front end: 2 stripes, 2 of 2 movers up",
		"Mover 0:", dst.addrs[0] + " up", "Mover 1:", dst.addrs[1] + " up"} {
		if !strings.Contains(text, want) {
			t.Errorf("ferry endpoint show dst lacks %q:\n%s", want, text)
		}
	}

	id := c.transfer("src:/run", "dst:/run", "-r", "--verify-checksum", "--label", "striped")
	task := c.succeeded(id, time.Minute)
	if task.Files != 5 || task.BytesTransferred < big {
		t.Errorf("task: %d files, %d bytes transferred; want 5 files, over %d bytes", task.Files, task.BytesTransferred, big)
	}
	if err := compareTrees(src.Path("run"), dst.Path("run")); err != nil {
		t.Fatal(err)
	}
	var events api.EventList
	c.decode(&events, "task", "events", id)
	ways := slices.DeleteFunc(slices.Clone(events.Data), func(e api.Event) bool { return e.Code != domain.EventWay })
	if len(ways) != 1 || !strings.HasPrefix(ways[0].Description, "striped for files of 64 MiB or more: stripes (SPAS): 2 at the destination, 2 at the source") ||
		!strings.Contains(ways[0].Details, `"way":"striped"`) {
		t.Errorf("WAY events %+v; want one saying striped over 2 stripes each side", ways)
	}

	dst.movers[1].kill9()
	st = movers("dst")
	if !st.Up || len(st.Movers) != 2 || !st.Movers[0].Up || st.Movers[1].Up || st.Movers[1].Reason == "" {
		t.Fatalf("dst after mover 1 was killed: %+v, want the front end up, mover 0 up, mover 1 down with a reason", st)
	}
	text = c.ok("", "endpoint", "show", "dst")
	for _, want := range []string{"1 of 2 movers up", dst.addrs[1] + " down: " + st.Movers[1].Reason} {
		if !strings.Contains(text, want) {
			t.Errorf("ferry endpoint show dst after mover 1 was killed lacks %q:\n%s", want, text)
		}
	}
	t.Logf("mover 1 down: %s; stripes now %d", st.Movers[1].Reason, st.Stripes)

	// The endpoint still takes tasks: its front end offers the mover left
	// (one stripe), and the large file moves the plain way through it,
	// its source's movers pipelining the files into that one mover.
	id = c.transfer("src:/run", "dst:/again", "-r", "--verify-checksum")
	c.succeeded(id, time.Minute)
	if ev := c.events(id); strings.Contains(ev, "FAULT") {
		t.Errorf("faults in the task after the kill:\n%s", ev)
	}
	if err := compareTrees(src.Path("run"), dst.Path("again")); err != nil {
		t.Fatal(err)
	}
	if ev := c.events(id); strings.Contains(ev, "WAY") {
		t.Errorf("a WAY event with one mover left:\n%s", ev)
	}
}
