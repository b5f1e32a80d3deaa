package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// A refused submission is answered 400 or 404 (the rules are core's, see
// service/core's TestSubmitRules), one that does not decode 400, one too
// big 413; none stores a task.
func TestTransferRefused(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	bob, _ := e.user("bob")
	addEndpoint(t, alice, "src", "anonymous", false)
	addEndpoint(t, alice, "dst", "anonymous", false)
	addEndpoint(t, bob, "private", "anonymous", false)
	// body is a transfer document with fields replaced or added.
	body := func(extra string) string {
		doc := `{"DATA_TYPE":"transfer","source_endpoint":"alice#src","destination_endpoint":"dst",` +
			`"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/a","destination_path":"/b"}]`
		if extra != "" {
			doc += "," + extra
		}
		return doc + "}"
	}
	items := func(src, dst string) string {
		b, _ := json.Marshal([]api.TransferItem{{SourcePath: src, DestinationPath: dst}})
		return `"DATA":` + string(b)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"malformed JSON", `{"source_endpoint":`, 400, "malformed JSON"},
		{"not an object", `[1,2]`, 400, "malformed JSON"},
		{"empty body", ``, 400, "empty request body"},
		{"trailing data", body("") + `{}`, 400, "after the document"},
		{"unknown field", body(`"skip_errors":true`), 400, "unknown field"},
		{"unknown item field", `{"source_endpoint":"src","destination_endpoint":"dst","DATA":[{"source_path":"/a","destination_path":"/b","size":1}]}`, 400, "unknown field"},
		{"wrong DATA_TYPE", `{"DATA_TYPE":"delete","source_endpoint":"src","destination_endpoint":"dst","DATA":[{"source_path":"/a","destination_path":"/b"}]}`, 400, "DATA_TYPE"},
		{"wrong item DATA_TYPE", `{"source_endpoint":"src","destination_endpoint":"dst","DATA":[{"DATA_TYPE":"delete_item","source_path":"/a","destination_path":"/b"}]}`, 400, "DATA_TYPE"},
		{"no items", `{"source_endpoint":"src","destination_endpoint":"dst","DATA":[]}`, 400, "no items"},
		{"sync level as a word", body(`"sync_level":"checksum"`), 400, "malformed JSON"},
		{"bad deadline", body(`"deadline":"tomorrow"`), 400, "malformed JSON"},
		{"unknown endpoint", `{"source_endpoint":"nosuch","destination_endpoint":"dst",` + items("/a", "/b") + `}`, 404, `no source endpoint "nosuch"`},
		{"body over MaxSubmitBody", `{"source_endpoint":"src","destination_endpoint":"dst",` + items("/"+strings.Repeat("a", maxSubmitBody), "/b") + `}`, 413, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw("POST", "transfer", tok, strings.NewReader(tc.body))
			ae := a.apiError(t)
			if a.status != tc.status || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("%d %+v, want %d and %q", a.status, ae, tc.status, tc.msg)
			}
		})
	}
	// A body between MaxBody and MaxSubmitBody is fine for a transfer.
	many := make([]api.TransferItem, 2000)
	for i := range many {
		many[i] = api.TransferItem{SourcePath: fmt.Sprintf("/src/file-%04d", i), DestinationPath: fmt.Sprintf("/dst/file-%04d", i)}
	}
	if _, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src", DestinationEndpoint: "dst", Data: many}); err != nil {
		t.Fatalf("transfer of %d items: %v", len(many), err)
	}
	tasks, err := alice.TaskList(t.Context(), api.TaskQuery{})
	if err != nil || tasks.Total != 1 {
		t.Fatalf("refused submissions stored tasks: %+v, %v", tasks, err)
	}
}

func TestTransfer(t *testing.T) {
	e := newEnv(t)
	alice, aliceTok := e.user("alice")
	bob, _ := e.user("bob")
	src := addEndpoint(t, alice, "src", "anonymous", false)
	dst := addEndpoint(t, bob, "dst", "anonymous", true)

	sub, err := alice.SubmissionID(t.Context())
	if err != nil || sub == "" {
		t.Fatalf("submission id %q, %v", sub, err)
	}
	deadline := e.clock.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	req := api.Transfer{
		SubmissionID: sub, Label: "run 1", SourceEndpoint: src.ID, DestinationEndpoint: "bob#dst",
		SyncLevel: new(3), VerifyChecksum: true, ChecksumAlgorithm: "md5", PreserveTimestamp: true,
		Deadline:    deadline,
		FilterRules: []api.FilterRule{{Method: "exclude", Name: "*.tmp", Type: "file"}},
		Notify:      api.Notify{NotifyOnSucceeded: new(false)},
		Data: []api.TransferItem{
			{SourcePath: "/data/../data/run1/", DestinationPath: "/copy/run1/", Recursive: true},
			{SourcePath: "../../etc/passwd", DestinationPath: "passwd"},
		},
	}
	res, err := alice.Transfer(t.Context(), req)
	if err != nil || res.Code != "Accepted" || res.DataType != "transfer_result" || res.TaskID == "" || res.SubmissionID != sub || res.TaskLink.Href != "task/"+res.TaskID {
		t.Fatalf("transfer: %+v, %v", res, err)
	}
	again, err := alice.Transfer(t.Context(), req)
	if err != nil || again.Code != "Duplicate" || again.TaskID != res.TaskID {
		t.Fatalf("same submission again: %+v, %v", again, err)
	}
	// Another user's submission ID is their own.
	if r, err := bob.Transfer(t.Context(), api.Transfer{SubmissionID: sub, SourceEndpoint: "dst", DestinationEndpoint: "dst",
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}}); err != nil || r.Code != "Accepted" || r.TaskID == res.TaskID {
		t.Fatalf("bob, same submission id: %+v, %v", r, err)
	}

	task, err := alice.Task(t.Context(), res.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	want := api.Task{
		DataType: "task", TaskID: res.TaskID, Type: "TRANSFER", Label: "run 1", Status: "ACTIVE", NiceStatus: "Queued",
		SubmissionID: sub, RequestTime: task.RequestTime, Deadline: task.Deadline,
		SourceEndpointID: src.ID, SourceEndpointDisplayName: "alice#src",
		DestinationEndpointID: task.DestinationEndpointID, DestinationEndpointDisplayName: "bob#dst",
		SyncLevel: new(3), VerifyChecksum: true, ChecksumAlgorithm: "MD5", PreserveTimestamp: true,
		FilterRules:    []api.FilterRule{{DataType: "filter_rule", Method: "exclude", Name: "*.tmp", Type: "file"}},
		NotifyOnFailed: true, NotifyOnInactive: true, SourcePath: "/", DestinationPath: "/",
	}
	if !equalJSON(t, task, want) || !task.Deadline.Equal(deadline) || task.DestinationEndpointID != dst.ID {
		t.Fatalf("task %+v\nwant %+v", task, want)
	}
	stored, err := e.db.TaskByID(t.Context(), res.TaskID)
	if err == nil {
		stored.Items, err = e.db.TaskItems(t.Context(), res.TaskID)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantItems := []domain.Item{{Src: "/data/run1/", Dst: "/copy/run1/", Recursive: true}, {Src: "/etc/passwd", Dst: "/passwd"}}
	if !equalJSON(t, stored.Items, wantItems) {
		t.Errorf("stored items %+v, want %+v (clean, rooted paths)", stored.Items, wantItems)
	}

	// Bob cannot see or touch Alice's task.
	_, err = bob.Task(t.Context(), res.TaskID)
	wantAPIError(t, err, 404, "NotFound")
	_, err = bob.CancelTask(t.Context(), res.TaskID)
	wantAPIError(t, err, 404, "NotFound")
	_, err = bob.UpdateTask(t.Context(), res.TaskID, api.TaskUpdate{Label: new("mine")})
	wantAPIError(t, err, 404, "NotFound")
	_, err = bob.Events(t.Context(), res.TaskID, api.Page{})
	wantAPIError(t, err, 404, "NotFound")
	_, err = bob.SuccessfulTransfers(t.Context(), res.TaskID, api.MarkerQuery{})
	wantAPIError(t, err, 404, "NotFound")
	_, err = bob.FailedTransfers(t.Context(), res.TaskID, api.MarkerQuery{})
	wantAPIError(t, err, 404, "NotFound")

	// Update: label and deadline only.
	if r, err := alice.UpdateTask(t.Context(), res.TaskID, api.TaskUpdate{Label: new("run 1b")}); err != nil || r.Code != "Updated" {
		t.Fatalf("update: %+v, %v", r, err)
	}
	later := deadline.Add(time.Hour)
	if _, err := alice.UpdateTask(t.Context(), res.TaskID, api.TaskUpdate{Deadline: &later}); err != nil {
		t.Fatal(err)
	}
	if got, _ := alice.Task(t.Context(), res.TaskID); got.Label != "run 1b" || !got.Deadline.Equal(later) {
		t.Errorf("updated task: label %q, deadline %v", got.Label, got.Deadline)
	}
	for _, body := range []string{`{"sync_level":1}`, `{"label":"a\u0000"}`, `{"deadline":"2001-01-01T00:00:00Z"}`, ``} {
		if a := e.raw("PUT", "task/"+res.TaskID, aliceTok, strings.NewReader(body)); a.status != 400 {
			t.Errorf("update %s: %d %s, want 400", body, a.status, a.body)
		}
	}
}

func TestTaskProgressAndCancel(t *testing.T) {
	e := newEnv(t)
	alice, aliceTok := e.user("alice")
	addEndpoint(t, alice, "ep", "anonymous", false)
	submit := func(label string) string {
		r, err := alice.Transfer(t.Context(), api.Transfer{Label: label, SourceEndpoint: "ep", DestinationEndpoint: "ep",
			Data: []api.TransferItem{{SourcePath: "/in", DestinationPath: "/out", Recursive: true}}})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
		return r.TaskID
	}
	running := submit("running")
	now := e.clock.Now()
	if c, err := e.db.Claim(t.Context(), "w1", now, time.Hour, 0); err != nil || c.ID != running {
		t.Fatalf("claim: %v, %v", c, err)
	}
	var files []domain.File
	for i := range 5 {
		files = append(files, domain.File{TaskID: running, Src: fmt.Sprintf("/in/f%d", i), Dst: fmt.Sprintf("/out/f%d", i), Size: 100, State: domain.FileSucceeded, Algorithm: "MD5", Checksum: "abc", Time: now})
	}
	files = append(files, domain.File{TaskID: running, Src: "/in/bad", Dst: "/out/bad", State: domain.FileFailed, Error: "550", Time: now},
		domain.File{TaskID: running, Src: "/in/gone", Dst: "/out/gone", State: domain.FileSkippedError, Error: "source: 550 No such file", Time: now})
	delta := domain.Counters{Files: 8, FilesTransferred: 5, FilesSkipped: 1, FilesFailed: 1, BytesTransferred: 500, BytesTotal: 900}
	if err := e.db.Progress(t.Context(), running, "w1", domain.Batch{Delta: delta, Files: files, Events: []domain.Event{{TaskID: running, Code: domain.EventStarted, Details: "concurrency=2", Time: now}}}); err != nil {
		t.Fatal(err)
	}

	// successful_transfers pages while the task runs.
	var got []string
	q := api.MarkerQuery{Limit: 2}
	for pages := 0; ; pages++ {
		l, err := alice.SuccessfulTransfers(t.Context(), running, q)
		if err != nil {
			t.Fatal(err)
		}
		if pages > 5 || l.Marker != q.Marker || len(l.Data) > 2 {
			t.Fatalf("page %+v for %+v", l, q)
		}
		for _, f := range l.Data {
			got = append(got, f.SourcePath)
			if f.DataType != "successful_transfer" || f.Size != 100 || f.ChecksumAlgorithm != "MD5" || f.Checksum != "abc" || f.DestinationPath != strings.Replace(f.SourcePath, "/in/", "/out/", 1) {
				t.Errorf("entry %+v", f)
			}
		}
		if l.NextMarker == 0 {
			break
		}
		q.Marker = l.NextMarker
	}
	if strings.Join(got, " ") != "/in/f0 /in/f1 /in/f2 /in/f3 /in/f4" {
		t.Errorf("successful transfers %v", got)
	}
	if a := e.raw("GET", "task/"+running+"/successful_transfers?marker=-3", aliceTok, nil); a.status != 400 {
		t.Errorf("bad marker: %d", a.status)
	}
	failed, err := alice.FailedTransfers(t.Context(), running, api.MarkerQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := api.FailedTransfers{DataType: "failed_transfers", Data: []api.FailedTransfer{
		{DataType: "failed_transfer", SourcePath: "/in/bad", DestinationPath: "/out/bad", Error: "550", Time: now.Truncate(time.Microsecond)}}}
	if !equalJSON(t, failed, want) {
		t.Errorf("failed transfers %+v, want %+v", failed, want)
	}

	skipped, err := alice.SkippedErrors(t.Context(), running, api.MarkerQuery{})
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := api.SkippedErrors{DataType: "skipped_errors", Data: []api.SkippedError{{DataType: "skipped_error",
		SourcePath: "/in/gone", DestinationPath: "/out/gone", ErrorDetails: "source: 550 No such file", ErrorTime: now.Truncate(time.Microsecond)}}}
	if !equalJSON(t, skipped, wantSkipped) {
		t.Errorf("skipped errors %+v, want %+v", skipped, wantSkipped)
	}

	e.clock.Add(10 * time.Second)
	task, err := alice.Task(t.Context(), running)
	if err != nil {
		t.Fatal(err)
	}
	if task.SubtasksTotal != 8 || task.SubtasksSucceeded != 6 || task.SubtasksFailed != 1 || task.SubtasksPending != 1 || task.BytesTransferred != 500 || task.BytesTotal != 900 || task.EffectiveBytesPerSecond <= 0 || task.EffectiveBytesPerSecond > 500 {
		t.Errorf("counters of %+v", task)
	}

	// Cancel one file, then the whole running task: the worker stops it.
	if r, err := alice.CancelFile(t.Context(), running, "/in/../in/big"); err != nil || r.Code != "FileCanceled" {
		t.Fatalf("cancel file: %+v, %v", r, err)
	}
	if c, err := e.db.CanceledFiles(t.Context(), running); err != nil || len(c) != 1 || c[0] != "/in/big" {
		t.Fatalf("canceled files %v, %v", c, err)
	}
	if r, err := alice.CancelTask(t.Context(), running); err != nil || r.Code != "Canceled" {
		t.Fatalf("cancel: %+v, %v", r, err)
	}
	if task, _ := alice.Task(t.Context(), running); !task.CancelRequested || task.Status != "ACTIVE" {
		t.Errorf("running task after cancel: %+v", task)
	}

	// A queued task is failed at once; canceling it again says so.
	queued := submit("queued")
	if r, err := alice.CancelTask(t.Context(), queued); err != nil || r.Code != "Canceled" {
		t.Fatalf("cancel queued: %+v, %v", r, err)
	}
	task, err = alice.Task(t.Context(), queued)
	if err != nil || task.Status != "FAILED" || task.NiceStatus != "" || task.FatalError == nil || task.CompletionTime.IsZero() {
		t.Fatalf("canceled task %+v, %v", task, err)
	}
	if r, err := alice.CancelTask(t.Context(), queued); err != nil || r.Code != "TaskComplete" {
		t.Fatalf("cancel again: %+v, %v", r, err)
	}
	if r, err := alice.CancelFile(t.Context(), queued, "/in/x"); err != nil || r.Code != "TaskComplete" {
		t.Fatalf("cancel a file of a done task: %+v, %v", r, err)
	}
	_, err = alice.UpdateTask(t.Context(), queued, api.TaskUpdate{Label: new("x")})
	wantAPIError(t, err, 409, "Conflict")

	evs, err := alice.Events(t.Context(), queued, api.Page{})
	if err != nil || evs.Total != 2 || evs.Data[0].Code != domain.EventQueued || evs.Data[1].Code != domain.EventCanceled || evs.Data[1].DataType != "event" {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if evs, err := alice.Events(t.Context(), running, api.Page{Limit: 1, Offset: 1}); err != nil || evs.Length != 1 || evs.Total != 2 || evs.Data[0].Details != "concurrency=2" {
		t.Fatalf("events page %+v, %v", evs, err)
	}
}

func TestTaskList(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	bob, _ := e.user("bob")
	addEndpoint(t, alice, "ep", "anonymous", false)
	addEndpoint(t, bob, "ep", "anonymous", false)
	for i := range 5 {
		if _, err := alice.Transfer(t.Context(), api.Transfer{Label: fmt.Sprintf("t%d", i), SourceEndpoint: "ep", DestinationEndpoint: "ep",
			Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	for i := range 2 {
		if _, err := alice.Delete(t.Context(), api.Delete{Label: fmt.Sprintf("d%d", i), Endpoint: "ep", Data: []api.DeleteItem{{Path: "/old"}}}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	if _, err := bob.Transfer(t.Context(), api.Transfer{Label: "bob", SourceEndpoint: "ep", DestinationEndpoint: "ep",
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}}); err != nil {
		t.Fatal(err)
	}
	d1, _ := alice.TaskList(t.Context(), api.TaskQuery{Type: []string{"DELETE"}, Page: api.Page{Limit: 1}})
	if _, err := alice.CancelTask(t.Context(), d1.Data[0].TaskID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q     api.TaskQuery
		want  string
		total int
	}{
		{api.TaskQuery{}, "d1 d0 t4 t3 t2 t1 t0", 7},
		{api.TaskQuery{Oldest: true, Page: api.Page{Limit: 2}}, "t0 t1", 7},
		{api.TaskQuery{Page: api.Page{Limit: 3, Offset: 3}}, "t3 t2 t1", 7},
		{api.TaskQuery{Page: api.Page{Offset: 10}}, "", 7},
		{api.TaskQuery{Type: []string{"TRANSFER"}, Page: api.Page{Limit: 1}}, "t4", 5},
		{api.TaskQuery{Status: []string{"ACTIVE", "INACTIVE"}, Type: []string{"DELETE"}}, "d0", 1},
		{api.TaskQuery{Status: []string{"FAILED"}}, "d1", 1},
		{api.TaskQuery{Label: "T3"}, "t3", 1},
	} {
		l, err := alice.TaskList(t.Context(), tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, task := range l.Data {
			labels = append(labels, task.Label)
		}
		if strings.Join(labels, " ") != tc.want || l.Total != tc.total || l.Length != len(labels) || l.DataType != "task_list" {
			t.Errorf("task list %+v: %v of %d, want %s of %d", tc.q, labels, l.Total, tc.want, tc.total)
		}
	}
	d, _ := alice.TaskList(t.Context(), api.TaskQuery{Type: []string{"DELETE"}, Oldest: true, Page: api.Page{Limit: 1}})
	if task := d.Data[0]; task.Type != "DELETE" || task.SourceEndpointDisplayName != "alice#ep" || task.DestinationEndpointID != "" || task.SyncLevel != nil {
		t.Errorf("delete task %+v", task)
	}
	for _, q := range []string{"filter=status:DONE", "filter=type:COPY", "filter=owner:bob", "filter=status", "limit=-1", "offset=x", "orderby=label"} {
		if a := e.raw("GET", "task_list?"+q, tok, nil); a.status != 400 {
			t.Errorf("task_list?%s: %d, want 400", q, a.status)
		}
	}
}

// TestTaskPaths: GET task/{id} says where the items are, the one item's
// paths or the directories that hold them all; task_list leaves them out.
func TestTaskPaths(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "ep", "anonymous", false)
	for _, tc := range []struct {
		items    []api.TransferItem
		src, dst string
	}{
		{[]api.TransferItem{{SourcePath: "/data/run1/", DestinationPath: "/copy/run1/", Recursive: true}}, "/data/run1/", "/copy/run1/"},
		{[]api.TransferItem{{SourcePath: "/data/a.dat", DestinationPath: "/copy/a.dat"}}, "/data/a.dat", "/copy/a.dat"},
		{[]api.TransferItem{{SourcePath: "/data/run1/a", DestinationPath: "/copy/a"}, {SourcePath: "/data/run2/b", DestinationPath: "/copy/b"}}, "/data/", "/copy/"},
		{[]api.TransferItem{{SourcePath: "/data/a", DestinationPath: "/x/a"}, {SourcePath: "/data/b", DestinationPath: "/y/b"}}, "/data/", "/"},
		{[]api.TransferItem{{SourcePath: "/a", DestinationPath: "/x/y/a"}, {SourcePath: "/b/", DestinationPath: "/x/y/b/", Recursive: true}}, "/", "/x/y/"},
	} {
		r, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "ep", DestinationEndpoint: "ep", Data: tc.items})
		if err != nil {
			t.Fatal(err)
		}
		task, err := alice.Task(t.Context(), r.TaskID)
		if err != nil || task.SourcePath != tc.src || task.DestinationPath != tc.dst {
			t.Errorf("%+v: source_path %q, destination_path %q, %v; want %q, %q", tc.items, task.SourcePath, task.DestinationPath, err, tc.src, tc.dst)
		}
	}
	r, err := alice.Delete(t.Context(), api.Delete{Endpoint: "ep", Data: []api.DeleteItem{{Path: "/old/a"}, {Path: "/old/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := alice.Task(t.Context(), r.TaskID); err != nil || task.SourcePath != "/old/" || task.DestinationPath != "" {
		t.Errorf("delete task: source_path %q, destination_path %q, %v", task.SourcePath, task.DestinationPath, err)
	}
	if l, err := alice.TaskList(t.Context(), api.TaskQuery{}); err != nil || l.Data[0].SourcePath != "" {
		t.Errorf("task_list: %+v, %v (want no paths)", l.Data[0], err)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	addEndpoint(t, alice, "ep", "anonymous", false)
	r, err := alice.Delete(t.Context(), api.Delete{Endpoint: "ep", Recursive: true, IgnoreMissing: true,
		Data: []api.DeleteItem{{Path: "/old/"}, {Path: "/tmp/x"}}})
	if err != nil || r.Code != "Accepted" || r.DataType != "delete_result" {
		t.Fatalf("delete: %+v, %v", r, err)
	}
	stored, err := e.db.TaskByID(t.Context(), r.TaskID)
	if err == nil {
		stored.Items, err = e.db.TaskItems(t.Context(), r.TaskID)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Item{{Src: "/old/", Recursive: true}, {Src: "/tmp/x", Recursive: true}}
	if !equalJSON(t, stored.Items, want) || !stored.Options.IgnoreMissing || stored.Type != domain.TypeDelete || stored.DstEndpoint != "" {
		t.Errorf("stored delete task %+v", stored)
	}
	for _, tc := range []struct{ name, body string }{
		{"the root", `{"endpoint":"ep","DATA":[{"path":"/x/.."}]}`},
		{"no path", `{"endpoint":"ep","DATA":[{}]}`},
		{"no items", `{"endpoint":"ep","DATA":[]}`},
		{"no endpoint", `{"DATA":[{"path":"/x"}]}`},
		{"transfer item", `{"endpoint":"ep","DATA":[{"DATA_TYPE":"transfer_item","path":"/x"}]}`},
		{"transfer field", `{"endpoint":"ep","sync_level":1,"DATA":[{"path":"/x"}]}`},
	} {
		if a := e.raw("POST", "delete", tok, strings.NewReader(tc.body)); a.status != 400 {
			t.Errorf("%s: %d %s, want 400", tc.name, a.status, a.body)
		}
	}
}

func TestQueuedHookAndDefaultDeadline(t *testing.T) {
	var queued atomic.Int32
	e := newEnv(t, func(s *setup) {
		s.Queued = func() { queued.Add(1) }
		s.DefaultDeadline = 6 * time.Hour
	})
	alice, _ := e.user("alice")
	ep := addEndpoint(t, alice, "ep", "anonymous", false)
	req := api.Transfer{SubmissionID: "s1", SourceEndpoint: ep.ID, DestinationEndpoint: ep.ID,
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}}
	res, err := alice.Transfer(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := queued.Load(); n != 1 {
		t.Fatalf("Queued called %d times after a submission, want 1", n)
	}
	if _, err := alice.Transfer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := queued.Load(); n != 1 {
		t.Fatalf("Queued called %d times after a duplicate submission, want still 1", n)
	}
	task, err := alice.Task(t.Context(), res.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if want := task.RequestTime.Add(6 * time.Hour); !task.Deadline.Equal(want) {
		t.Fatalf("deadline %v, want request time + 6h = %v", task.Deadline, want)
	}
}

func TestTransferDestinationsRefused(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	bob, _ := e.user("bob")
	for _, n := range []string{"src", "a", "b"} {
		addEndpoint(t, alice, n, "anonymous", false)
	}
	addEndpoint(t, bob, "private", "anonymous", false)
	// All the endpoints share one server: paths on them are one storage.
	doc := func(dests string, items ...string) string {
		if len(items) == 0 {
			items = []string{`{"source_path":"/a","destination_path":"/b"}`}
		}
		return `{"DATA_TYPE":"transfer","source_endpoint":"src","destinations":[` + dests + `],"DATA":[` + strings.Join(items, ",") + `]}`
	}
	many := strings.TrimSuffix(strings.Repeat(`{"endpoint":"a","destination_paths":["/x"]},`, domain.MaxDestinations+1), ",")
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"both shapes", `{"source_endpoint":"src","destination_endpoint":"a","destinations":[{"endpoint":"b"}],"DATA":[{"source_path":"/a","destination_path":"/b"}]}`, 400, "give one or the other"},
		{"no endpoint", doc(`{"endpoint":"a"},{"destination_paths":["/c"]}`), 400, "no endpoint for destination 2 given"},
		{"unknown endpoint", doc(`{"endpoint":"a"},{"endpoint":"nosuch"}`), 404, "no endpoint for destination 2"},
		{"wrong DATA_TYPE", doc(`{"DATA_TYPE":"transfer_item","endpoint":"a"}`), 400, "DATA_TYPE"},
		{"unknown field", doc(`{"endpoint":"a","path":"/c"}`), 400, "unknown field"},
		{"too few paths", doc(`{"endpoint":"a"},{"endpoint":"b","destination_paths":["/c"]}`, `{"source_path":"/a","destination_path":"/b"}`, `{"source_path":"/d","destination_path":"/e"}`), 400, "1 paths for 2 items"},
		{"empty path", doc(`{"endpoint":"a"},{"endpoint":"b","destination_paths":[""]}`), 400, "item 1 has no destination path for destination 2"},
		{"control character in a path", doc(`{"endpoint":"a"},{"endpoint":"b","destination_paths":["/c\nd"]}`), 400, "control character"},
		{"same place twice", doc(`{"endpoint":"a"},{"endpoint":"a"}`), 400, "destinations 1 and 2 are one place"},
		{"same server and path", doc(`{"endpoint":"a"},{"endpoint":"b"}`), 400, "are one place"},
		{"one inside another", doc(`{"endpoint":"a","destination_paths":["/out"]},{"endpoint":"b","destination_paths":["/out/in"]}`), 400, "are one place"},
		{"a destination is the source", doc(`{"endpoint":"a"},{"endpoint":"src","destination_paths":["/a"]}`), 400, "is the source"},
		{"too many", doc(many), 400, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw("POST", "transfer", tok, strings.NewReader(tc.body))
			ae := a.apiError(t)
			if a.status != tc.status || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("%d %+v, want %d and %q", a.status, ae, tc.status, tc.msg)
			}
		})
	}
	if tasks, err := alice.TaskList(t.Context(), api.TaskQuery{}); err != nil || tasks.Total != 0 {
		t.Fatalf("refused submissions stored tasks: %+v, %v", tasks, err)
	}
}

func TestTransferDestinations(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	src := addEndpoint(t, alice, "src", "anonymous", false)
	a := addEndpoint(t, alice, "a", "anonymous", false)
	b := addEndpoint(t, alice, "b", "anonymous", false)
	c := addEndpoint(t, alice, "c", "anonymous", false)
	res, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src",
		Destinations: []api.TransferDestination{{Endpoint: "a"}, {DataType: "transfer_destination", Endpoint: b.ID, DestinationPaths: []string{"/b/../other/"}}, {Endpoint: "alice#c", DestinationPaths: []string{"/third"}}},
		Data:         []api.TransferItem{{SourcePath: "/in/", DestinationPath: "/out/", Recursive: true}}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := alice.Task(t.Context(), res.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.TaskDestination{
		{DataType: "task_destination", EndpointID: a.ID, EndpointDisplayName: "alice#a"},
		{DataType: "task_destination", EndpointID: b.ID, EndpointDisplayName: "alice#b", DestinationPaths: []string{"/other/"}},
		{DataType: "task_destination", EndpointID: c.ID, EndpointDisplayName: "alice#c", DestinationPaths: []string{"/third"}},
	}
	if !equalJSON(t, task.Destinations, want) || task.DestinationEndpointID != a.ID || task.SourceEndpointID != src.ID {
		t.Fatalf("task %+v\nwant destinations %+v", task, want)
	}
	// Per-destination progress and failures, as a worker records them.
	w, err := e.db.Claim(t.Context(), "w", e.clock.Now(), time.Minute, 0)
	if err != nil || w.ID != res.TaskID {
		t.Fatalf("claim: %+v, %v", w, err)
	}
	if err := e.db.Progress(t.Context(), w.ID, "w", domain.Batch{DestFiles: []domain.DestFile{
		{Dest: 0, Src: "/in/f", Dst: "/out/f", Size: 7, State: domain.FileSucceeded},
		{Dest: 1, Src: "/in/f", Dst: "/other/f", Size: 7, State: domain.FileSkipped},
		{Dest: 2, Src: "/in/f", Dst: "/third/f", Size: 7, State: domain.FileFailed, Error: "refused"},
	}}); err != nil {
		t.Fatal(err)
	}
	task, _ = alice.Task(t.Context(), res.TaskID)
	if d := task.Destinations; d[0].FilesTransferred != 1 || d[0].BytesTransferred != 7 || d[1].FilesSkipped != 1 || d[2].FilesFailed != 1 {
		t.Fatalf("destinations' counters: %+v", d)
	}
	failed, err := alice.FailedTransfers(t.Context(), res.TaskID, api.MarkerQuery{})
	if err != nil || len(failed.Data) != 1 || failed.Data[0].DestinationEndpointID != c.ID || failed.Data[0].Error != "refused" || failed.Data[0].DestinationPath != "/third/f" {
		t.Fatalf("failed transfers: %+v, %v", failed, err)
	}
	// One destination in the destinations shape is the single shape.
	one, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src",
		Destinations: []api.TransferDestination{{Endpoint: "a", DestinationPaths: []string{"/mine"}}},
		Data:         []api.TransferItem{{SourcePath: "/in", DestinationPath: "/out"}}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.db.TaskByID(t.Context(), one.TaskID)
	if err == nil {
		stored.Items, err = e.db.TaskItems(t.Context(), one.TaskID)
	}
	if err != nil || stored.Destinations != nil || stored.DstEndpoint != a.ID || stored.Items[0].Dst != "/mine" {
		t.Fatalf("one destination: %+v, %v", stored, err)
	}
}

// TestTransferErrorOptions: skip_source_errors and fail_on_quota_errors
// are kept with the task and echoed in its document; a transfer to
// several destinations cannot skip source errors.
func TestTransferErrorOptions(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "src", "anonymous", false)
	addEndpoint(t, alice, "dst", "anonymous", false)
	addEndpoint(t, alice, "dst2", "anonymous", false)
	items := []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}
	for _, tc := range []struct{ skip, quota bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		r, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src", DestinationEndpoint: "dst",
			SkipSourceErrors: tc.skip, FailOnQuotaErrors: tc.quota, Data: items})
		if err != nil {
			t.Fatal(err)
		}
		task, err := alice.Task(t.Context(), r.TaskID)
		if err != nil || task.SkipSourceErrors != tc.skip || task.FailOnQuotaErrors != tc.quota {
			t.Errorf("submitted %+v: task %+v, %v", tc, task, err)
		}
	}
	_, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src", SkipSourceErrors: true, Data: items,
		Destinations: []api.TransferDestination{{Endpoint: "dst"}, {Endpoint: "dst2", DestinationPaths: []string{"/c"}}}})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "cannot skip source errors") {
		t.Errorf("several destinations skipping source errors: %v", err)
	}
}
