package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"ferry/service/domain"
)

var leaseTests = []test{
	{"Claim", testClaim},
	{"ClaimRace", func(t *testing.T, open Open) { claimRace(t, open(t)) }},
	{"Heartbeat", testHeartbeat},
	{"Reclaim", testReclaim},
	{"ResumeTask", testResumeTask},
	{"LeaseLost", testLeaseLost},
	{"Progress", testProgress},
	{"SetStatus", testSetStatus},
	{"ReactivateDeactivate", testReactivateDeactivate},
}

func testClaim(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, f *fixture, alice, bob domain.User)
	}{
		{"oldest first", func(t *testing.T, f *fixture, alice, _ domain.User) {
			ep := f.endpoint(alice, "ep", false, 0)
			c := f.task(alice, ep, ep, t0.Add(2*time.Minute))
			a := f.task(alice, ep, ep, t0)
			b := f.task(alice, ep, ep, t0.Add(time.Minute))
			got := f.claim(a, "w1", t0.Add(time.Hour), 0)
			want := a
			want.Worker, want.LeaseExpires, want.StartTime, want.NiceStatus = "w1", t0.Add(time.Hour+lease), t0.Add(time.Hour), domain.NiceOK
			equal(t, "claimed task", got, want)
			equal(t, "stored claimed task", f.get(a.ID), want)
			f.claim(b, "w2", t0.Add(time.Hour), 0)
			f.claim(c, "w1", t0.Add(time.Hour), 0)
			f.noClaim(t0.Add(time.Hour), 0)
		}},
		{"only ACTIVE", func(t *testing.T, f *fixture, alice, _ domain.User) {
			ep := f.endpoint(alice, "ep", false, 0)
			done := f.task(alice, ep, ep, t0)
			f.claim(done, "w", t0, 0)
			f.ok(f.s.SetStatus(f.ctx, done.ID, "w", domain.StatusSucceeded, "", nil, t0, nil))
			f.task(alice, ep, ep, t0)
			_, err := f.s.Deactivate(f.ctx, alice.ID, ep.ID, domain.NiceNotActivated, t0)
			f.ok(err)
			f.noClaim(t0.Add(time.Hour), 0)
		}},
		{"expired lease", func(t *testing.T, f *fixture, alice, _ domain.User) {
			ep := f.endpoint(alice, "ep", false, 0)
			a := f.task(alice, ep, ep, t0)
			f.claim(a, "w1", t0, 0)
			f.noClaim(t0.Add(lease-time.Second), 0)
			got := f.claim(a, "w2", t0.Add(lease), 0)
			if got.Worker != "w2" || !got.StartTime.Equal(t0) || !got.LeaseExpires.Equal(t0.Add(2*lease)) {
				t.Fatalf("task taken over: %+v; want worker w2, start time %v, lease until %v", got, t0, t0.Add(2*lease))
			}
			equal(t, "events", codes(f.events(a.ID)), []string{domain.EventQueued, domain.EventLeaseTaken})
			equal(t, "faults after a take-over", got.Faults, int64(1))
			// The same worker again is no take-over.
			got = f.claim(a, "w2", t0.Add(2*lease), 0)
			equal(t, "events", codes(f.events(a.ID)), []string{domain.EventQueued, domain.EventLeaseTaken})
			equal(t, "faults after a claim by the same worker", got.Faults, int64(1))
		}},
		{"per-user limit", func(t *testing.T, f *fixture, alice, bob domain.User) {
			ep := f.endpoint(alice, "ep", true, 0)
			a1, a2, a3 := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0.Add(time.Second)), f.task(alice, ep, ep, t0.Add(2*time.Second))
			b1 := f.task(bob, ep, ep, t0.Add(3*time.Second))
			f.claim(a1, "w", t0, 2)
			f.claim(b1, "w", t0, 2) // bob runs none, alice one
			f.claim(a2, "w", t0, 2)
			f.noClaim(t0, 2)
			f.claim(a3, "w", t0, 0) // no limit
			f.ok(f.s.SetStatus(f.ctx, a1.ID, "w", domain.StatusSucceeded, "", nil, t0, nil))
			// Expired leases do not count: a2's is taken, and then
			// alice is at the limit of 1 again.
			later := t0.Add(lease)
			f.claim(a2, "w2", later, 1)
			f.claim(b1, "w2", later, 1)
			f.noClaim(later, 1)
		}},
		{"users take turns", func(t *testing.T, f *fixture, owner, _ domain.User) {
			// Alice queued all of hers before bob's first: still, the
			// user running fewest goes first, with or without a limit.
			ep := f.endpoint(owner, "ep", true, 0)
			for _, perUser := range []int{3, 0} {
				alice, bob := f.user(fmt.Sprint("alice", perUser)), f.user(fmt.Sprint("bob", perUser))
				var as, bs []domain.Task
				for i := range 4 {
					as = append(as, f.task(alice, ep, ep, t0.Add(time.Duration(i)*time.Second)))
				}
				for i := range 4 {
					bs = append(bs, f.task(bob, ep, ep, t0.Add(time.Minute+time.Duration(i)*time.Second)))
				}
				for i := range 3 {
					f.claim(as[i], "w", t0, perUser)
					f.claim(bs[i], "w", t0, perUser)
				}
				if perUser > 0 {
					f.noClaim(t0, perUser)
					f.ok(f.s.SetStatus(f.ctx, bs[0].ID, "w", domain.StatusSucceeded, "", nil, t0, nil))
					f.claim(bs[3], "w", t0, perUser) // bob's turn: alice runs 3
					f.noClaim(t0, perUser)
				} else {
					f.claim(as[3], "w", t0, perUser)
					f.claim(bs[3], "w", t0, perUser)
				}
				f.noClaim(t0, perUser)
				for _, task := range append(as, bs...) { // end them all: queued ones fail, running ones succeed
					_, err := f.s.RequestCancel(f.ctx, task.UserID, task.ID, t0)
					f.ok(err)
					f.s.SetStatus(f.ctx, task.ID, "w", domain.StatusSucceeded, "", nil, t0, nil) // or done already
				}
			}
		}},
		{"a user at the limit is passed over", func(t *testing.T, f *fixture, alice, bob domain.User) {
			// Alice's backlog, older than bob's task and blocking none.
			ep := f.endpoint(alice, "ep", true, 0)
			for i := range 50 {
				f.task(alice, ep, ep, t0.Add(time.Duration(i)*time.Millisecond))
			}
			for range 3 {
				_, err := f.s.Claim(f.ctx, "w", t0, lease, 3)
				f.ok(err)
			}
			b := f.task(bob, ep, ep, t0.Add(time.Hour))
			f.claim(b, "w", t0, 3)
			f.noClaim(t0, 3)
		}},
		{"endpoint limit", func(t *testing.T, f *fixture, alice, bob domain.User) {
			lim := f.endpoint(alice, "limited", true, 2)
			free := f.endpoint(alice, "free", true, 0)
			both := f.task(alice, lim, lim, t0) // counts once
			dst := f.task(bob, free, lim, t0.Add(time.Second))
			src := f.task(alice, lim, free, t0.Add(2*time.Second))
			other := f.task(bob, free, free, t0.Add(3*time.Second))
			f.claim(both, "w", t0, 0)
			f.claim(dst, "w", t0, 0)
			f.claim(other, "w", t0, 0)
			f.noClaim(t0, 0)
			f.ok(f.s.SetStatus(f.ctx, dst.ID, "w", domain.StatusFailed, "", nil, t0, nil))
			f.claim(src, "w", t0, 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open(t))
			c.run(t, f, f.user("alice"), f.user("bob"))
		})
	}
}

func testHeartbeat(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task := f.claim(f.task(alice, ep, ep, t0), "w", t0, 0)

	f.ok(f.s.UpdateTask(f.ctx, alice.ID, task.ID, "new label", t0.Add(time.Hour)))
	_, err := f.s.RequestCancel(f.ctx, alice.ID, task.ID, t0)
	f.ok(err)
	// Even an expired lease is the worker's until another takes it.
	now := t0.Add(3 * lease)
	got, err := f.s.Heartbeat(f.ctx, task.ID, "w", now, lease)
	f.ok(err)
	want := f.get(task.ID)
	equal(t, "heartbeat", got, want)
	if !want.LeaseExpires.Equal(now.Add(lease)) || want.Label != "new label" || !want.CancelRequested || want.Worker != "w" {
		t.Fatalf("after a heartbeat: %+v; want the lease until %v, the new label, cancel requested", want, now.Add(lease))
	}
}

// testLeaseLost checks that a worker that lost its lease can neither
// heartbeat, nor record progress, nor set the status, and changes nothing.
func testReclaim(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	live := f.claim(f.task(alice, ep, ep, t0), "w1", t0, 0)
	lapsed := f.claim(f.task(alice, ep, ep, t0.Add(time.Second)), "w1", t0, 0)
	others := f.claim(f.task(alice, ep, ep, t0.Add(2*time.Second)), "w2", t0, 0)
	queued := f.task(alice, ep, ep, t0.Add(3*time.Second))
	now := t0.Add(lease / 2)
	got, err := f.s.Reclaim(f.ctx, "w1", now.Add(lease), lease)
	f.ok(err)
	var ids []string
	for _, task := range got {
		ids = append(ids, task.ID)
		equal(t, "reclaimed lease", task.LeaseExpires, now.Add(2*lease))
		// A restart is a fault of each task it stopped, and an event.
		equal(t, "faults of a reclaimed task", task.Faults, int64(1))
		equal(t, "events of a reclaimed task", codes(f.events(task.ID)), []string{domain.EventQueued, domain.EventRestarted})
	}
	slices.Sort(ids)
	want := []string{live.ID, lapsed.ID}
	slices.Sort(want)
	equal(t, "reclaimed", ids, want)
	equal(t, "another worker's task", f.get(others.ID).Worker, "w2")
	equal(t, "queued task", f.get(queued.ID).Worker, "")
	none, err := f.s.Reclaim(f.ctx, "w3", now, lease)
	f.ok(err)
	equal(t, "a worker with no leases", len(none), 0)
}

func testResumeTask(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	ep := f.endpoint(alice, "ep", false, 0)
	task := f.claim(f.task(alice, ep, ep, t0), "w", t0, 0)
	wantCode(t, f.s.ResumeTask(f.ctx, alice.ID, task.ID, t0), domain.EConflict) // ACTIVE
	f.ok(f.s.SetStatus(f.ctx, task.ID, "w", domain.StatusInactive, domain.NiceNoSpace, nil, t0, nil))
	wantCode(t, f.s.ResumeTask(f.ctx, bob.ID, task.ID, t0), domain.ENotFound)
	f.ok(f.s.ResumeTask(f.ctx, alice.ID, task.ID, t0.Add(time.Second)))
	got := f.get(task.ID)
	if got.Status != domain.StatusActive || got.NiceStatus != domain.NiceQueued || got.Worker != "" {
		t.Fatalf("resumed task %s %s %q", got.Status, got.NiceStatus, got.Worker)
	}
	if evs := f.events(task.ID); evs[len(evs)-1].Code != domain.EventResumed {
		t.Errorf("events %v", codes(evs))
	}
	f.claim(task, "w2", t0.Add(time.Second), 0)
}

func testLeaseLost(t *testing.T, open Open) {
	for _, c := range []struct {
		name  string
		lose  func(f *fixture, task domain.Task) // task is held by w1 from t0
		loser string
	}{
		{"another worker", func(*fixture, domain.Task) {}, "w3"},
		{"taken over", func(f *fixture, task domain.Task) { f.claim(task, "w2", t0.Add(lease), 0) }, "w1"},
		{"task done", func(f *fixture, task domain.Task) {
			f.ok(f.s.SetStatus(f.ctx, task.ID, "w1", domain.StatusSucceeded, "", nil, t0, nil))
		}, "w1"},
		{"task paused", func(f *fixture, task domain.Task) {
			f.ok(f.s.SetStatus(f.ctx, task.ID, "w1", domain.StatusInactive, domain.NiceCredentialExpired, nil, t0, nil))
		}, "w1"},
		{"task canceled after expiry", func(f *fixture, task domain.Task) {
			_, err := f.s.RequestCancel(f.ctx, task.UserID, task.ID, t0.Add(lease))
			f.ok(err)
		}, "w1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open(t))
			alice := f.user("alice")
			ep := f.endpoint(alice, "ep", false, 0)
			task := f.claim(f.task(alice, ep, ep, t0), "w1", t0, 0)
			c.lose(f, task)
			loser := c.loser
			before, beforeEvents := f.get(task.ID), f.events(task.ID)
			now := t0.Add(lease + time.Second)
			ev := []domain.Event{{Code: domain.EventProgress}}
			for _, call := range []struct {
				name string
				err  error
			}{
				{"Heartbeat", func() error { _, err := f.s.Heartbeat(f.ctx, task.ID, loser, now, lease); return err }()},
				{"Progress", f.s.Progress(f.ctx, task.ID, loser, domain.Batch{Delta: domain.Counters{Files: 1, BytesTransferred: 10},
					Files: []domain.File{{Src: "/x", State: domain.FileSucceeded}}, Events: ev, Partials: []domain.Partial{{Src: "/y", State: "0-5"}}})},
				{"SetStatus", f.s.SetStatus(f.ctx, task.ID, loser, domain.StatusFailed, "", nil, now, ev)},
			} {
				if !domain.IsNotFound(call.err) {
					t.Errorf("%s by a worker that lost the lease: %v, want ENotFound", call.name, call.err)
				}
			}
			equal(t, "task", f.get(task.ID), before)
			equal(t, "events", f.events(task.ID), beforeEvents)
			if files, _, err := f.s.Files(f.ctx, task.ID, "", 0, 0); err != nil || len(files) != 0 {
				t.Fatalf("files: %+v, %v; want none", files, err)
			}
		})
	}
}

func testProgress(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task := f.claim(f.task(alice, ep, ep, t0), "w", t0, 0)
	d1 := domain.Counters{Files: 10, Directories: 2, FilesTransferred: 3, FilesSkipped: 1, FilesFailed: 1,
		BytesTransferred: 1 << 40, BytesTotal: 1 << 41, BytesChecksummed: 1 << 30, Faults: 2}
	d2 := domain.Counters{Files: 1, FilesTransferred: 4, BytesTransferred: 5, BytesTotal: -3}
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Delta: d1, Events: []domain.Event{
		{Code: domain.EventStarted, Details: "concurrency=4", Time: t0},
		{Code: domain.EventFault, Description: "reset", IsError: true, Time: t0.Add(time.Second)},
	}}))
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Delta: d2, Files: []domain.File{{Src: "/a", Dst: "/b", Size: 5, State: domain.FileSucceeded, Time: t0}}}))

	want := d1
	want.Add(d2)
	equal(t, "counters", f.get(task.ID).Counters, want)
	evs := f.events(task.ID)
	equal(t, "events", evs[1:], []domain.Event{
		{TaskID: task.ID, Seq: 2, Code: domain.EventStarted, Details: "concurrency=4", Time: t0},
		{TaskID: task.ID, Seq: 3, Code: domain.EventFault, Description: "reset", IsError: true, Time: t0.Add(time.Second)},
	})
	files, _, err := f.s.Files(f.ctx, task.ID, "", 0, 0)
	f.ok(err)
	equal(t, "files", files, []domain.File{{TaskID: task.ID, Src: "/a", Dst: "/b", Size: 5, State: domain.FileSucceeded, Time: t0}})

	// Partials: put, replaced, deleted; per task.
	other := f.claim(f.task(alice, ep, ep, t0.Add(time.Second)), "w", t0, 0)
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Partials: []domain.Partial{{Src: "/c", State: "0-10", Size: 30, Have: 10}, {Src: "/d", State: "0-1"}}}))
	f.ok(f.s.Progress(f.ctx, other.ID, "w", domain.Batch{Partials: []domain.Partial{{Src: "/c", State: "other"}}}))
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Partials: []domain.Partial{{Src: "/c", State: "0-20", Size: 30, Have: 20}, {Src: "/d"}, {Src: "/never"}}}))
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Partials: []domain.Partial{{Src: "/e", State: "0-1", Size: 2, Have: 1}}}))
	// Paged in the order first recorded: a replaced record keeps its place.
	var ps []domain.Partial
	for marker := int64(0); ; {
		page, next, err := f.s.Partials(f.ctx, task.ID, marker, 1)
		f.ok(err)
		ps = append(ps, page...)
		if marker = next; marker == 0 {
			break
		}
	}
	equal(t, "partials", ps, []domain.Partial{{Src: "/c", State: "0-20", Size: 30, Have: 20}, {Src: "/e", State: "0-1", Size: 2, Have: 1}})

	// Many in one batch (a tar stream's files): put, replaced and deleted
	// in statements of many rows each.
	many := f.claim(f.task(alice, ep, ep, t0.Add(2*time.Second)), "w", t0, 0)
	const n = 2500
	put, gone := make([]domain.Partial, n), make([]domain.Partial, n)
	for i := range n {
		put[i] = domain.Partial{Src: fmt.Sprintf("/m/%d", i), State: "1 0", Size: 1}
		gone[i] = domain.Partial{Src: put[i].Src}
	}
	f.ok(f.s.Progress(f.ctx, many.ID, "w", domain.Batch{Partials: put}))
	put[7].State = "1 0 0-1"
	f.ok(f.s.Progress(f.ctx, many.ID, "w", domain.Batch{Partials: append(gone[:7:7], append(put[7:8], gone[8:]...)...)}))
	left, next, err := f.s.Partials(f.ctx, many.ID, 0, 10)
	f.ok(err)
	equal(t, "partials left", left, []domain.Partial{{Src: "/m/7", State: "1 0 0-1", Size: 1}})
	if next != 0 {
		t.Errorf("partials left: next marker %d, want 0", next)
	}
}

func testSetStatus(t *testing.T, open Open) {
	fatal := &domain.FatalError{Code: "PERMISSION_DENIED", Description: "no"}
	for _, c := range []struct {
		status, nice string
		fatal        *domain.FatalError
		claimable    bool
	}{
		{domain.StatusSucceeded, "", nil, false},
		{domain.StatusFailed, "", fatal, false},
		{domain.StatusInactive, domain.NiceCredentialExpired, nil, false},
		{domain.StatusActive, domain.NiceQueued, nil, true}, // handed back
	} {
		t.Run(c.status, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open(t))
			alice := f.user("alice")
			ep := f.endpoint(alice, "ep", false, 0)
			task := f.claim(f.task(alice, ep, ep, t0), "w", t0, 0)
			now := t0.Add(time.Minute)
			f.ok(f.s.SetStatus(f.ctx, task.ID, "w", c.status, c.nice, c.fatal, now, []domain.Event{{Code: "X", Description: "status"}}))
			want := task
			want.Status, want.NiceStatus, want.FatalError, want.Worker, want.LeaseExpires = c.status, c.nice, c.fatal, "", time.Time{}
			if domain.Done(c.status) {
				want.CompletionTime = now
			}
			equal(t, "task", f.get(task.ID), want)
			evs := f.events(task.ID)
			equal(t, "last event", evs[len(evs)-1], domain.Event{TaskID: task.ID, Seq: 2, Code: "X", Description: "status", Time: now})
			if c.claimable {
				f.claim(task, "w2", now, 0)
			} else {
				f.noClaim(now, 0)
			}
		})
	}
}

func testReactivateDeactivate(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	e, g, h := f.endpoint(alice, "e", true, 0), f.endpoint(alice, "g", true, 0), f.endpoint(alice, "h", true, 0)
	running := f.task(alice, e, g, t0)   // held by a worker
	expired := f.task(alice, g, e, t0)   // its worker's lease expired
	queued := f.task(alice, e, e, t0)    // uses e twice
	elsewhere := f.task(alice, g, h, t0) // does not use e
	f.claim(running, "w2", t0, 0)
	f.claim(expired, "w1", t0.Add(-lease), 0) // running's lease is live then too
	bobs := f.task(bob, e, g, t0)             // another user's (queued after the claims: bob, running none, would go first)

	n, err := f.s.Deactivate(f.ctx, alice.ID, e.ID, domain.NiceNotActivated, t0)
	f.ok(err)
	tasks := map[string]domain.Task{"running": running, "expired": expired, "queued": queued, "elsewhere": elsewhere, "bob's": bobs}
	// status checks the status, nice status and worker of each task.
	status := func(want map[string]domain.Task) {
		t.Helper()
		for what, task := range want {
			got := f.get(tasks[what].ID)
			if got.Status != task.Status || got.NiceStatus != task.NiceStatus || got.Worker != task.Worker {
				t.Errorf("%s task: %s/%s held by %q; want %s/%s held by %q", what, got.Status, got.NiceStatus, got.Worker,
					task.Status, task.NiceStatus, task.Worker)
			}
		}
	}
	paused := domain.Task{Status: domain.StatusInactive, NiceStatus: domain.NiceNotActivated}
	waiting := domain.Task{Status: domain.StatusActive, NiceStatus: domain.NiceQueued}
	held := domain.Task{Status: domain.StatusActive, NiceStatus: domain.NiceOK, Worker: "w2"}
	if n != 2 {
		t.Errorf("Deactivate: %d tasks, want 2", n)
	}
	status(map[string]domain.Task{"running": held, "expired": paused, "queued": paused, "elsewhere": waiting, "bob's": waiting})
	wantCodes := func(task domain.Task, want ...string) {
		t.Helper()
		if got := codes(f.events(task.ID)); !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
	}
	wantCodes(queued, domain.EventQueued, domain.EventInactive)
	_, err = f.s.Heartbeat(f.ctx, expired.ID, "w1", t0, lease)
	wantCode(t, err, domain.ENotFound)

	f.ok(f.s.SetStatus(f.ctx, running.ID, "w2", domain.StatusInactive, domain.NiceCredentialExpired, nil, t0, nil))
	n, err = f.s.Reactivate(f.ctx, bob.ID, e.ID, t0) // bob has nothing paused
	f.ok(err)
	if n != 0 {
		t.Errorf("Reactivate of bob: %d tasks, want 0", n)
	}
	n, err = f.s.Reactivate(f.ctx, alice.ID, e.ID, t0)
	f.ok(err)
	if n != 3 {
		t.Errorf("Reactivate: %d tasks, want 3", n)
	}
	status(map[string]domain.Task{"running": waiting, "expired": waiting, "queued": waiting, "elsewhere": waiting, "bob's": waiting})
	wantCodes(queued, domain.EventQueued, domain.EventInactive, domain.EventResumed)
	wantCodes(bobs, domain.EventQueued)
	wantCodes(elsewhere, domain.EventQueued)
}
