package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"ferry/internal/synclevel"
	"ferry/service/domain"
)

var taskTests = []test{
	{"CreateTask", testCreateTask},
	{"TaskScope", testTaskScope},
	{"TaskList", testTaskList},
	{"Cancel", testCancel},
	{"CancelFile", testCancelFile},
	{"Files", testFiles},
	{"FileRecords", testFileRecords},
	{"Deletions", testDeletions},
	{"Events", testEvents},
	{"Destinations", testDestinations},
	{"DestinationLimits", testDestinationLimits},
	{"TaskCounts", testTaskCounts},
}

func testCreateTask(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	src, dst := f.endpoint(alice, "src", false, 0), f.endpoint(alice, "dst", false, 0)
	in := domain.Task{UserID: alice.ID, SubmissionID: "sub-1", Type: domain.TypeTransfer, Label: "first",
		SrcEndpoint: src.ID, DstEndpoint: dst.ID, Deadline: t0.Add(24 * time.Hour), RequestTime: t0,
		Items: []domain.Item{{Src: "/a", Dst: "/b"}, {Src: "/dir/", Dst: "/out/", Recursive: true}},
		Options: domain.Options{SyncLevel: synclevel.Checksum, VerifyChecksum: true, ChecksumAlgorithm: "SHA256",
			FilterRules:      []domain.FilterRule{{Method: "exclude", Name: "*.tmp", Type: "file"}},
			SkipSourceErrors: true, FailOnQuotaErrors: true,
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
	pages := pagesOf(t, "Files", func(marker int64) ([]domain.File, int64, error) {
		return f.s.Files(f.ctx, task.ID, "", marker, 3)
	})
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

	equal(t, "recorded in /s/", recordedIn(f, task.ID, "/s/"), []string{"/s/0", "/s/1", "/s/2", "/s/3", "/s/4", "/s/5", "/s/6"})
	equal(t, "recorded in / of the other task", recordedIn(f, other.ID, "/"), []string{"/other"})
	equal(t, "recorded in /", recordedIn(f, task.ID, "/"), []string(nil))
}

// recordedIn is what Store.RecordedIn finds in dir, as full paths, sorted.
func recordedIn(f *fixture, taskID, dir string) []string {
	f.t.Helper()
	var got []string
	f.ok(f.s.RecordedIn(f.ctx, taskID, dir, func(name, _ string) { got = append(got, dir+name) }))
	sort.Strings(got)
	return got
}

// testFileRecords records files with odd paths (spaces, a newline, bytes
// that are not UTF-8, no directory, an empty name, a destination named
// otherwise or none) and sizes (unknown: -1; a terabyte), thousands in
// one directory in one batch, a thousand directories in one batch, and
// directories in several batches, in every state, and reads them back:
// every page size covers every record once, in the order recorded, each
// state's pages too, and RecordedIn finds each directory's names.
func testFileRecords(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task, other := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0.Add(time.Second))
	f.claim(task, "w", t0, 0)
	f.claim(other, "w", t0, 0)
	states := []string{domain.FileSucceeded, domain.FileSkipped, domain.FileFailed, domain.FileCanceled, domain.FileSkippedError}
	odd := []domain.File{
		{Src: "/a b/c d", Dst: "/x y/c d"},
		{Src: "/a b/new\nline", Dst: "/x y/renamed"},
		{Src: "/\xff\xfe/\x80", Dst: "/\xff\xfe/\x80", Checksum: "\x01\x02"},
		{Src: "relative", Dst: "", Size: -1},
		{Src: "/dir/", Dst: "/dir/"},
		{Src: "/ünï/cödé", Dst: "/ünï/cödé", Size: 1 << 40, Algorithm: "SHA256", Checksum: "abc", Error: "it broke: /ünï/cödé"},
	}
	var batches [][]domain.File
	var all []domain.File
	at := t0
	add := func(batch []domain.File) {
		for i := range batch {
			at = at.Add(time.Millisecond)
			batch[i].TaskID, batch[i].Time = task.ID, at
			if batch[i].State == "" {
				batch[i].State = states[i%len(states)]
			}
		}
		batches = append(batches, batch)
		all = append(all, batch...)
	}
	for i, fl := range odd {
		fl.State = states[i%len(states)]
		add([]domain.File{fl})
	}
	var big []domain.File // one directory, one state, more than a row holds
	for i := range 1234 {
		big = append(big, domain.File{Src: fmt.Sprintf("/big/f%d", i), Dst: fmt.Sprintf("/out/big/f%d", i), Size: int64(i), State: domain.FileSucceeded})
	}
	add(big)
	var wide []domain.File // a directory a file: more rows than one statement inserts
	for i := range 1001 {
		wide = append(wide, domain.File{Src: fmt.Sprintf("/wide/%d/f", i), Dst: fmt.Sprintf("/o/wide/%d/f", i), State: domain.FileSkipped})
	}
	add(wide)
	for b := range 3 { // directories met in several batches
		var batch []domain.File
		for d := range 4 {
			for i := range 5 {
				batch = append(batch, domain.File{Src: fmt.Sprintf("/d%d/b%d-%d", d, b, i), Dst: fmt.Sprintf("/o/d%d/b%d-%d", d, b, i),
					State: states[d], Size: int64(i)})
			}
		}
		add(batch)
	}
	for _, b := range batches {
		f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Files: b}))
		f.ok(f.s.Progress(f.ctx, other.ID, "w", domain.Batch{Files: []domain.File{{Src: "/big/other", State: domain.FileSucceeded}}}))
	}
	for _, limit := range []int{5, 333, 1000} {
		for _, state := range append([]string{""}, states...) {
			var want []domain.File
			for _, fl := range all {
				if state == "" || fl.State == state {
					want = append(want, fl)
				}
			}
			var got []domain.File
			for marker := int64(0); ; {
				page, next, err := f.s.Files(f.ctx, task.ID, state, marker, limit)
				f.ok(err)
				if len(page) > limit || next != 0 && len(page) < limit {
					t.Fatalf("state %q, limit %d, from marker %d: %d files, next marker %d", state, limit, marker, len(page), next)
				}
				got = append(got, page...)
				if next == 0 {
					break
				}
				if len(got) > len(want) {
					t.Fatalf("state %q, limit %d: pages never end", state, limit)
				}
				marker = next
			}
			equal(t, fmt.Sprintf("files in state %q, pages of %d", state, limit), got, want)
		}
	}
	dirs := map[string][]string{}
	for _, fl := range all {
		dir, _ := domain.SplitDir(fl.Src)
		dirs[dir] = append(dirs[dir], fl.Src+" > "+fl.Dst)
	}
	for dir, want := range dirs {
		sort.Strings(want)
		var got []string
		f.ok(f.s.RecordedIn(f.ctx, task.ID, dir, func(name, dst string) { got = append(got, dir+name+" > "+dst) }))
		sort.Strings(got)
		equal(t, "recorded in "+dir+", with destinations", got, want)
	}
	equal(t, "recorded in /none/", recordedIn(f, task.ID, "/none/"), []string(nil))
}

// testDeletions stores deletions in two batches, of two tasks, and reads
// them back in order, in pages; a removed user's go with her tasks.
func testDeletions(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := f.endpoint(alice, "ep", false, 0)
	task, other := f.task(alice, ep, ep, t0), f.task(alice, ep, ep, t0.Add(time.Second))
	f.claim(task, "w", t0, 0)
	f.claim(other, "w", t0, 0)
	var dels []domain.Deletion
	for i := range 5 {
		dels = append(dels, domain.Deletion{Dest: i % 2, Path: fmt.Sprintf("/d/extra %d", i), Dir: i == 4, Size: int64(i * 10),
			Time: t0.Add(time.Duration(i) * time.Second)})
	}
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Deletions: dels[:2]}))
	f.ok(f.s.Progress(f.ctx, other.ID, "w", domain.Batch{Deletions: []domain.Deletion{{Path: "/other", Time: t0}}}))
	f.ok(f.s.Progress(f.ctx, task.ID, "w", domain.Batch{Deletions: dels[2:]}))
	pages := pagesOf(t, "Deletions", func(marker int64) ([]domain.Deletion, int64, error) {
		return f.s.Deletions(f.ctx, task.ID, marker, 2)
	})
	equal(t, "pages of deletions", pages, [][]domain.Deletion{dels[0:2], dels[2:4], dels[4:5]})
	wantCode(t, f.s.Progress(f.ctx, task.ID, "another", domain.Batch{Deletions: dels[:1]}), domain.ENotFound)
	if got, _, err := f.s.Deletions(f.ctx, task.ID, 0, 0); err != nil || len(got) != len(dels) {
		t.Fatalf("after a batch of a worker without the lease: %d deletions, %v; want %d", len(got), err, len(dels))
	}
	for _, id := range []string{task.ID, other.ID} {
		f.ok(f.s.SetStatus(f.ctx, id, "w", domain.StatusSucceeded, "", nil, t0, nil))
	}
	f.ok(f.s.RemoveUser(f.ctx, alice.ID))
	if got, _, err := f.s.Deletions(f.ctx, task.ID, 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("deletions of a removed user's task: %v %v", got, err)
	}
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

// multiTask creates a transfer of u from src to each of dsts, the second
// with its own paths.
func (f *fixture) multiTask(u domain.User, src domain.Endpoint, dsts ...domain.Endpoint) domain.Task {
	f.t.Helper()
	t := domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: src.ID, RequestTime: t0,
		Items: []domain.Item{{Src: "/src/", Dst: "/dst/", Recursive: true}, {Src: "/f", Dst: "/g"}}}
	for i, d := range dsts {
		dest := domain.Destination{Endpoint: d.ID}
		if i == 1 {
			dest.Paths = []string{"/elsewhere/", "/h"}
		}
		t.Destinations = append(t.Destinations, dest)
	}
	f.ok(f.s.CreateTask(f.ctx, &t))
	t.Items = nil
	return t
}

func testDestinations(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	src, a, b, c := f.endpoint(alice, "src", false, 0), f.endpoint(alice, "a", false, 0), f.endpoint(alice, "b", false, 0), f.endpoint(alice, "c", false, 0)
	task := f.multiTask(alice, src, a, b, c)
	want := []domain.Destination{{Endpoint: a.ID}, {Endpoint: b.ID, Paths: []string{"/elsewhere/", "/h"}}, {Endpoint: c.ID}}
	equal(t, "created destinations", task.Destinations, want)
	if task.DstEndpoint != a.ID {
		t.Fatalf("DstEndpoint %s, want the first destination %s", task.DstEndpoint, a.ID)
	}
	equal(t, "stored task", f.get(task.ID), task)
	equal(t, "endpoints", task.Endpoints(), []string{src.ID, a.ID, b.ID, c.ID})
	if one := f.task(alice, src, a, t0); one.Destinations != nil || f.get(one.ID).Destinations != nil {
		t.Fatalf("a task with one destination has Destinations: %+v", f.get(one.ID))
	}

	claimed := f.claim(task, "w1", t0, 0)
	equal(t, "claimed destinations", claimed.Destinations, want)
	rec := func(files ...domain.DestFile) {
		t.Helper()
		f.ok(f.s.Progress(f.ctx, task.ID, "w1", domain.Batch{DestFiles: files}))
	}
	rec(domain.DestFile{Dest: 0, Src: "/f", Dst: "/g", Size: 10, State: domain.FileSucceeded},
		domain.DestFile{Dest: 1, Src: "/f", Dst: "/h", Size: 10, State: domain.FileSkipped},
		domain.DestFile{Dest: 2, Src: "/f", Dst: "/g", Size: 10, State: domain.FileFailed, Error: "refused"},
		domain.DestFile{Dest: 0, Src: "/src/x", Dst: "/dst/x", Size: 5, State: domain.FileSucceeded})
	want[0].DestCounters = domain.DestCounters{FilesTransferred: 2, BytesTransferred: 15}
	want[1].DestCounters = domain.DestCounters{FilesSkipped: 1}
	want[2].DestCounters = domain.DestCounters{FilesFailed: 1}
	equal(t, "counters", f.get(task.ID).Destinations, want)
	// A later outcome replaces the record and moves the counters; the
	// same outcome again counts once.
	rec(domain.DestFile{Dest: 2, Src: "/f", Dst: "/g", Size: 10, State: domain.FileSucceeded},
		domain.DestFile{Dest: 0, Src: "/f", Dst: "/g", Size: 10, State: domain.FileSucceeded})
	want[2].DestCounters = domain.DestCounters{FilesTransferred: 1, BytesTransferred: 10}
	equal(t, "counters after a repair", f.get(task.ID).Destinations, want)
	if ts, _, err := f.s.Tasks(f.ctx, alice.ID, domain.TaskFilter{}, domain.Page{}); err != nil || len(ts) != 2 || !reflect.DeepEqual(ts[0].Destinations, want) {
		t.Fatalf("listed: %+v, %v", ts, err)
	}
	if hb, err := f.s.Heartbeat(f.ctx, task.ID, "w1", t0, lease); err != nil || !reflect.DeepEqual(hb.Destinations, want) {
		t.Fatalf("heartbeat: %+v, %v", hb.Destinations, err)
	}

	all, next, err := f.s.DestFiles(f.ctx, task.ID, -1, "", 0, 0)
	f.ok(err)
	if len(all) != 4 || next != 0 {
		t.Fatalf("all destination files: %+v (next %d)", all, next)
	}
	at2, _, err := f.s.DestFiles(f.ctx, task.ID, 2, "", 0, 0)
	f.ok(err)
	if len(at2) != 1 || at2[0].State != domain.FileSucceeded || at2[0].Error != "" || at2[0].Dst != "/g" || at2[0].Time.IsZero() {
		t.Fatalf("destination 2's files: %+v", at2)
	}
	skipped, _, err := f.s.DestFiles(f.ctx, task.ID, -1, domain.FileSkipped, 0, 0)
	f.ok(err)
	if len(skipped) != 1 || skipped[0].Dest != 1 || skipped[0].Dst != "/h" {
		t.Fatalf("skipped: %+v", skipped)
	}
	page, next, err := f.s.DestFiles(f.ctx, task.ID, -1, "", 0, 3)
	f.ok(err)
	rest, last, err := f.s.DestFiles(f.ctx, task.ID, -1, "", next, 3)
	f.ok(err)
	if len(page) != 3 || next == 0 || len(rest) != 1 || last != 0 {
		t.Fatalf("pages of 3: %d (next %d), then %d (next %d)", len(page), next, len(rest), last)
	}
	// Another worker's batch stores nothing.
	wantCode(t, f.s.Progress(f.ctx, task.ID, "w2", domain.Batch{DestFiles: []domain.DestFile{{Dest: 1, Src: "/g", State: domain.FileFailed}}}), domain.ENotFound)
	equal(t, "counters after a lost lease", f.get(task.ID).Destinations, want)
}

// testDestinationLimits: a task uses every one of its destinations, for
// the endpoints' concurrency limits and for pausing and resuming the
// tasks of an endpoint.
func testDestinationLimits(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	src, a, b := f.endpoint(alice, "src", false, 0), f.endpoint(alice, "a", false, 0), f.endpoint(alice, "b", false, 0)
	one := f.endpoint(alice, "one", false, 1)
	first := f.multiTask(alice, src, a, b, one)
	second := f.multiTask(alice, src, a, one)
	f.claim(first, "w1", t0, 0)
	f.noClaim(t0, 0) // one runs one task at a time, as the third destination of the first
	f.ok(f.s.SetStatus(f.ctx, first.ID, "w1", domain.StatusSucceeded, "", nil, t0, nil))
	n, err := f.s.Deactivate(f.ctx, alice.ID, one.ID, domain.NiceCredentialExpired, t0)
	f.ok(err)
	if n != 1 || f.get(second.ID).Status != domain.StatusInactive {
		t.Fatalf("deactivated %d tasks, want the second: %+v", n, f.get(second.ID))
	}
	if n, err := f.s.Reactivate(f.ctx, alice.ID, one.ID, t0); err != nil || n != 1 {
		t.Fatalf("reactivated %d tasks (%v), want 1", n, err)
	}
	f.claim(second, "w2", t0, 0)
}

// testTaskCounts counts tasks by status across users, as they move.
func testTaskCounts(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	ea, eb := f.endpoint(alice, "a", false, 0), f.endpoint(bob, "b", false, 0)
	count := func(want map[string]int) {
		t.Helper()
		got, err := f.s.TaskCounts(f.ctx)
		f.ok(err)
		equal(t, "task counts", got, want)
	}
	count(map[string]int{})
	first := f.task(alice, ea, ea, t0)
	f.task(alice, ea, ea, t0.Add(time.Second))
	last := f.task(bob, eb, eb, t0.Add(2*time.Second))
	count(map[string]int{domain.StatusActive: 3})
	f.claim(first, "w1", t0, 0)
	f.ok(f.s.SetStatus(f.ctx, first.ID, "w1", domain.StatusSucceeded, "", nil, t0, nil))
	_, err := f.s.RequestCancel(f.ctx, bob.ID, last.ID, t0)
	f.ok(err)
	_, err = f.s.Deactivate(f.ctx, alice.ID, ea.ID, domain.NiceNotActivated, t0)
	f.ok(err)
	count(map[string]int{domain.StatusSucceeded: 1, domain.StatusFailed: 1, domain.StatusInactive: 1})
}

// pagesOf reads what fetch pages from marker 0 until its next marker is
// 0, failing the test after more than 3 pages (they never end) or on an
// error; what names the listing.
func pagesOf[T any](t *testing.T, what string, fetch func(marker int64) ([]T, int64, error)) [][]T {
	t.Helper()
	var pages [][]T
	for marker := int64(0); ; {
		page, next, err := fetch(marker)
		if err != nil {
			t.Fatalf("%s from marker %d: %v", what, marker, err)
		}
		pages = append(pages, page)
		if next == 0 {
			return pages
		}
		if len(pages) > 3 {
			t.Fatalf("%s pages never end", what)
		}
		marker = next
	}
}
