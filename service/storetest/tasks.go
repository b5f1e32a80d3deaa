package storetest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"ferry/service/domain"
)

var taskTests = []test{
	{"CreateTask", testCreateTask},
	{"TaskScope", testTaskScope},
	{"TaskList", testTaskList},
	{"Cancel", testCancel},
	{"CancelFile", testCancelFile},
	{"Files", testFiles},
	{"Events", testEvents},
}

func testCreateTask(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	src, dst := f.endpoint(alice, "src", false, 0), f.endpoint(alice, "dst", false, 0)
	in := domain.Task{UserID: alice.ID, SubmissionID: "sub-1", Type: domain.TypeTransfer, Label: "first",
		SrcEndpoint: src.ID, DstEndpoint: dst.ID, Deadline: t0.Add(24 * time.Hour), RequestTime: t0,
		Items: []domain.Item{{Src: "/a", Dst: "/b"}, {Src: "/dir/", Dst: "/out/", Recursive: true}},
		Options: domain.Options{SyncLevel: domain.SyncChecksum, VerifyChecksum: true, ChecksumAlgorithm: "SHA256",
			FilterRules:       []domain.FilterRule{{Method: "exclude", Name: "*.tmp", Type: "file"}},
			NotifyOnSucceeded: true},
		// Set only by workers: CreateTask clears them.
		Status: domain.StatusFailed, Worker: "w", Counters: domain.Counters{Files: 3}, CancelRequested: true,
	}
	task := in
	f.ok(f.s.CreateTask(f.ctx, &task))
	wantUUID(t, task.ID)
	want := domain.Task{ID: task.ID, UserID: in.UserID, SubmissionID: in.SubmissionID, Type: in.Type, Label: in.Label,
		Status: domain.StatusActive, NiceStatus: domain.NiceQueued, SrcEndpoint: in.SrcEndpoint, DstEndpoint: in.DstEndpoint,
		Items: in.Items, Options: in.Options, Deadline: in.Deadline, RequestTime: in.RequestTime}
	equal(t, "created task", task, want)
	// Reads leave the items out; TaskItems has them.
	want.Items = nil
	equal(t, "stored task", f.get(task.ID), want)
	items, err := f.s.TaskItems(f.ctx, task.ID)
	f.ok(err)
	equal(t, "stored items", items, in.Items)
	_, err = f.s.TaskItems(f.ctx, "no-such-task")
	wantCode(t, err, domain.ENotFound)
	evs := f.events(task.ID)
	if len(evs) != 1 || evs[0].Code != domain.EventQueued || evs[0].Seq != 1 || evs[0].TaskID != task.ID {
		t.Fatalf("events of a new task: %+v, want one QUEUED with Seq 1", evs)
	}

	// The same submission ID again: the first task, EDuplicate, nothing stored.
	again := in
	again.Label = "second"
	err = f.s.CreateTask(f.ctx, &again)
	wantCode(t, err, domain.EDuplicate)
	equal(t, "task of a duplicate submission", again, want)
	if tasks, n, err := f.s.Tasks(f.ctx, alice.ID, domain.TaskFilter{}, domain.Page{}); err != nil || n != 1 || len(tasks) != 1 {
		t.Fatalf("after a duplicate: %d tasks (%d listed), %v; want 1", n, len(tasks), err)
	}
	if evs := f.events(task.ID); len(evs) != 1 {
		t.Fatalf("a duplicate added events: %+v", evs)
	}

	// Another user's submission ID may be the same; no submission ID
	// never is a duplicate; a zero request time is now.
	for _, c := range []struct {
		user domain.User
		sub  string
	}{{bob, "sub-1"}, {alice, ""}, {alice, ""}} {
		tk := domain.Task{UserID: c.user.ID, SubmissionID: c.sub, Type: domain.TypeDelete, SrcEndpoint: src.ID}
		f.ok(f.s.CreateTask(f.ctx, &tk))
		if tk.ID == task.ID || tk.RequestTime.IsZero() {
			t.Fatalf("task %+v: want a new ID and a request time", tk)
		}
	}
}

func testTaskScope(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	ep := f.endpoint(alice, "ep", true, 0)
	task := f.task(alice, ep, ep, t0)
	got, err := f.s.Task(f.ctx, alice.ID, task.ID)
	f.ok(err)
	equal(t, "Task", got, task)

	f.ok(f.s.UpdateTask(f.ctx, alice.ID, task.ID, "relabeled", t0.Add(time.Hour)))
	task.Label, task.Deadline = "relabeled", t0.Add(time.Hour)
	equal(t, "updated task", f.get(task.ID), task)
	f.ok(f.s.UpdateTask(f.ctx, alice.ID, task.ID, "", time.Time{}))
	task.Label, task.Deadline = "", time.Time{}
	equal(t, "task with no label or deadline", f.get(task.ID), task)

	runErrCases(t, []errCase{
		{"another user's", func() error { _, err := f.s.Task(f.ctx, bob.ID, task.ID); return err }, domain.ENotFound},
		{"missing", func() error { _, err := f.s.TaskByID(f.ctx, "nope"); return err }, domain.ENotFound},
		{"update another user's", func() error { return f.s.UpdateTask(f.ctx, bob.ID, task.ID, "x", time.Time{}) }, domain.ENotFound},
		{"cancel another user's", func() error { _, err := f.s.RequestCancel(f.ctx, bob.ID, task.ID, t0); return err }, domain.ENotFound},
		{"cancel a file of another user's", func() error { return f.s.CancelFile(f.ctx, bob.ID, task.ID, "/a") }, domain.ENotFound},
		{"list another user's", func() error {
			if tasks, n, err := f.s.Tasks(f.ctx, bob.ID, domain.TaskFilter{}, domain.Page{}); err != nil || n != 0 || len(tasks) != 0 {
				return fmt.Errorf("bob sees %d tasks (%d listed), %v", n, len(tasks), err)
			}
			return nil
		}, ""},
	})
	if got := f.get(task.ID); got.Label != "" || got.CancelRequested || got.Status != domain.StatusActive {
		t.Fatalf("another user changed the task: %+v", got)
	}
}

func testTaskList(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	ep := f.endpoint(alice, "ep", true, 0)
	mk := func(typ, label string, at time.Time) string {
		t.Helper()
		tk := domain.Task{UserID: alice.ID, Type: typ, Label: label, SrcEndpoint: ep.ID, RequestTime: at}
		f.ok(f.s.CreateTask(f.ctx, &tk))
		return tk.ID
	}
	t1 := mk(domain.TypeTransfer, "Nightly backup", t0)
	t2 := mk(domain.TypeDelete, "cleanup", t0.Add(time.Minute))
	t3 := mk(domain.TypeTransfer, "nightly sync", t0.Add(2*time.Minute))
	t4 := mk(domain.TypeTransfer, "same time as t3", t0.Add(2*time.Minute)) // ties keep insertion order
	f.task(bob, ep, ep, t0)
	wantCode(t, f.s.SetStatus(f.ctx, t3, "w", domain.StatusFailed, "", nil, t0, nil), domain.ENotFound) // not leased
	claimed := f.claim(f.get(t1), "w", t0, 0)
	f.ok(f.s.SetStatus(f.ctx, claimed.ID, "w", domain.StatusFailed, "", &domain.FatalError{Code: "X"}, t0, nil))

	for _, c := range []struct {
		name   string
		filter domain.TaskFilter
		page   domain.Page
		want   []string
		total  int
	}{
		{"all, oldest first", domain.TaskFilter{}, domain.Page{}, []string{t1, t2, t3, t4}, 4},
		{"newest first", domain.TaskFilter{Newest: true}, domain.Page{}, []string{t4, t3, t2, t1}, 4},
		{"status", domain.TaskFilter{Status: []string{domain.StatusActive}}, domain.Page{}, []string{t2, t3, t4}, 3},
		{"statuses", domain.TaskFilter{Status: []string{domain.StatusFailed, domain.StatusSucceeded}}, domain.Page{}, []string{t1}, 1},
		{"type", domain.TaskFilter{Type: []string{domain.TypeDelete}}, domain.Page{}, []string{t2}, 1},
		{"label, any case", domain.TaskFilter{Label: "NIGHTLY"}, domain.Page{}, []string{t1, t3}, 2},
		{"all filters", domain.TaskFilter{Label: "nightly", Type: []string{domain.TypeTransfer}, Status: []string{domain.StatusActive}}, domain.Page{}, []string{t3}, 1},
		{"page", domain.TaskFilter{}, domain.Page{Limit: 2, Offset: 1}, []string{t2, t3}, 4},
		{"past the end", domain.TaskFilter{}, domain.Page{Offset: 4}, nil, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			tasks, total, err := f.s.Tasks(f.ctx, alice.ID, c.filter, c.page)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tk := range tasks {
				ids = append(ids, tk.ID)
			}
			equal(t, "tasks", ids, c.want)
			if total != c.total {
				t.Fatalf("total %d, want %d", total, c.total)
			}
		})
	}
}

func testCancel(t *testing.T, open Open) {
	const w = "w1"
	for _, c := range []struct {
		name  string
		setup func(f *fixture, task domain.Task) // task is queued at t0
		at    time.Time                          // of the cancel
		// want: failed at once, or marked for the worker
		failed, marked bool
		status         string
	}{
		{"queued", func(*fixture, domain.Task) {}, t0, true, true, domain.StatusFailed},
		{"inactive", func(f *fixture, task domain.Task) {
			_, err := f.s.Deactivate(f.ctx, task.UserID, task.SrcEndpoint, domain.NiceNotActivated, t0)
			f.ok(err)
		}, t0, true, true, domain.StatusFailed},
		{"running", func(f *fixture, task domain.Task) { f.claim(task, w, t0, 0) }, t0.Add(lease / 2), false, true, domain.StatusActive},
		{"lease expired", func(f *fixture, task domain.Task) { f.claim(task, w, t0, 0) }, t0.Add(2 * lease), true, true, domain.StatusFailed},
		{"succeeded", func(f *fixture, task domain.Task) {
			f.claim(task, w, t0, 0)
			f.ok(f.s.SetStatus(f.ctx, task.ID, w, domain.StatusSucceeded, "", nil, t0, nil))
		}, t0.Add(time.Minute), false, false, domain.StatusSucceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open(t))
			alice := f.user("alice")
			ep := f.endpoint(alice, "ep", false, 0)
			task := f.task(alice, ep, ep, t0)
			c.setup(f, task)
			before := f.get(task.ID)
			got, err := f.s.RequestCancel(f.ctx, alice.ID, task.ID, c.at)
			f.ok(err)
			equal(t, "returned task", got, f.get(task.ID))
			if got.Status != c.status || got.CancelRequested != c.marked {
				t.Fatalf("canceled task: status %s, cancel requested %v; want %s, %v", got.Status, got.CancelRequested, c.status, c.marked)
			}
			evs := f.events(task.ID)
			last := evs[len(evs)-1]
			if !c.failed {
				if last.Code == domain.EventCanceled || !got.CompletionTime.Equal(before.CompletionTime) {
					t.Fatalf("task not failed at once has events %v, completion time %v", codes(evs), got.CompletionTime)
				}
				return
			}
			if last.Code != domain.EventCanceled || !last.Time.Equal(c.at) || !got.CompletionTime.Equal(c.at) ||
				got.FatalError == nil || got.Worker != "" || got.NiceStatus != "" {
				t.Fatalf("task failed at once: %+v, events %+v", got, evs)
			}
			if _, err := f.s.Heartbeat(f.ctx, task.ID, w, c.at, lease); !domain.IsNotFound(err) {
				t.Fatalf("heartbeat of a failed task: %v, want ENotFound", err)
			}
			f.noClaim(c.at, 0)
		})
	}
}

func testCancelFile(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task, done := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0.Add(time.Second))
	f.claim(task, "w", t0, 0)
	f.claim(done, "w", t0, 0)
	f.ok(f.s.SetStatus(f.ctx, done.ID, "w", domain.StatusSucceeded, "", nil, t0, nil))

	for _, src := range []string{"/b", "/a", "/b"} {
		f.ok(f.s.CancelFile(f.ctx, alice.ID, task.ID, src))
	}
	got, err := f.s.CanceledFiles(f.ctx, task.ID)
	f.ok(err)
	sort.Strings(got)
	equal(t, "CanceledFiles", got, []string{"/a", "/b"})
	runErrCases(t, []errCase{
		{"missing task", func() error { return f.s.CancelFile(f.ctx, alice.ID, "nope", "/a") }, domain.ENotFound},
		{"done task", func() error { return f.s.CancelFile(f.ctx, alice.ID, done.ID, "/a") }, domain.EConflict},
	})
	if got, err := f.s.CanceledFiles(f.ctx, done.ID); err != nil || len(got) != 0 {
		t.Fatalf("canceled files of a done task: %v, %v", got, err)
	}
}

func testFiles(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task, other := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0.Add(time.Second))
	f.claim(task, "w", t0, 0)
	f.claim(other, "w", t0, 0)
	states := []string{domain.FileSucceeded, domain.FileFailed, domain.FileSkipped, domain.FileCanceled}
	var files []domain.File
	for i := range 7 {
		files = append(files, domain.File{TaskID: task.ID, Src: fmt.Sprintf("/s/%d", i), Dst: fmt.Sprintf("/d/%d", i),
			Size: int64(i * 100), State: states[i%len(states)], Algorithm: "MD5", Checksum: fmt.Sprint(i), Time: t0.Add(time.Duration(i) * time.Second)})
	}
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Files: files[:4]}))
	f.ok(f.s.Progress(f.ctx, other.ID, "w", domain.Batch{Files: []domain.File{{Src: "/other", State: domain.FileSucceeded}}}))
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Files: files[4:]}))

	// Pages of 3, then one page of each state.
	var pages [][]domain.File
	for marker := int64(0); ; {
		page, next, err := f.s.Files(f.ctx, task.ID, "", marker, 3)
		f.ok(err)
		pages = append(pages, page)
		if next == 0 {
			break
		}
		if len(pages) > 3 {
			t.Fatal("Files pages never end")
		}
		marker = next
	}
	equal(t, "pages of files", pages, [][]domain.File{files[0:3], files[3:6], files[6:7]})
	for _, state := range states {
		var want []domain.File
		for _, fl := range files {
			if fl.State == state {
				want = append(want, fl)
			}
		}
		got, next, err := f.s.Files(f.ctx, task.ID, state, 0, 0)
		f.ok(err)
		equal(t, state+" files", got, want)
		if next != 0 {
			t.Fatalf("%s files: next marker %d after the last page", state, next)
		}
	}

	done, err := f.s.DoneFiles(f.ctx, task.ID)
	f.ok(err)
	sort.Strings(done)
	equal(t, "DoneFiles", done, []string{"/s/0", "/s/2", "/s/4", "/s/6"})
}

func testEvents(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task, other := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0)
	add := []domain.Event{
		{TaskID: task.ID, Code: domain.EventFault, Description: "connection reset", Details: "d", IsError: true, Time: t0.Add(time.Second)},
		{TaskID: other.ID, Code: domain.EventRetry, Time: t0},
		{TaskID: task.ID, Code: domain.EventRetry, Time: t0.Add(2 * time.Second)},
	}
	f.ok(f.s.AddEvents(f.ctx, add))
	wantCode(t, f.s.AddEvents(f.ctx, []domain.Event{{TaskID: task.ID, Code: "X"}, {TaskID: "nope", Code: "X"}}), domain.ENotFound)

	evs, total, err := f.s.Events(f.ctx, task.ID, domain.Page{Limit: 2, Offset: 1})
	f.ok(err)
	want := []domain.Event{add[0], add[2]}
	want[0].Seq, want[1].Seq = 2, 3
	equal(t, "a page of events", evs, want)
	if total != 3 {
		t.Fatalf("%d events in all, want 3 (an event of a failed AddEvents was stored?)", total)
	}

	// Concurrent appends number the events of a task 1, 2, 3, ...
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 3 {
				if err := f.s.AddEvents(f.ctx, []domain.Event{{TaskID: other.ID, Code: domain.EventProgress, Description: fmt.Sprint(i, j)}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, e := range f.events(other.ID) {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d of %d has Seq %d", i, len(f.events(other.ID)), e.Seq)
		}
	}
	if n := len(f.events(other.ID)); n != 2+12 {
		t.Fatalf("%d events, want 14", n)
	}
}
