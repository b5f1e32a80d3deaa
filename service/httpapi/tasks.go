package httpapi

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"

	"ferry/service/api"
	"ferry/service/domain"
)

// checkText refuses a user-given string longer than max characters or
// holding control characters.
func checkText(field, s string, max int) error {
	if len([]rune(s)) > max {
		return domain.Errorf(domain.EInvalid, "%s: longer than %d characters", field, max)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return domain.Errorf(domain.EInvalid, "%s: contains a control character", field)
	}
	return nil
}

func (s *Server) submissionID(w http.ResponseWriter, r *http.Request, c *call) error {
	return reply(w, http.StatusOK, api.SubmissionID{DataType: "submission_id", Value: rand.Text()})
}

// submitted answers a submission with its task's ID: a new task's, or
// the one an earlier submission with the same ID made.
func submitted(w http.ResponseWriter, r *http.Request, t domain.Task, created bool) error {
	status, code, msg := http.StatusAccepted, "Accepted", "the task is accepted"
	if !created {
		status, code, msg = http.StatusOK, domain.EDuplicate, "a task with this submission_id exists"
	}
	dt := strings.ToLower(t.Type) + "_result"
	return reply(w, status, api.SubmitResult{
		DataType: dt, Code: code, Message: msg, RequestID: callOf(r).id, Resource: r.URL.Path,
		SubmissionID: t.SubmissionID, TaskID: t.ID,
		TaskLink: api.Link{DataType: "link", Href: "task/" + t.ID, Rel: "related", Resource: "task", Title: "related task"},
	})
}

// submission is what a transfer's and a delete's documents share.
func submission(id, label string, deadline time.Time, n api.Notify) domain.Submission {
	return domain.Submission{SubmissionID: id, Label: label, Deadline: deadline,
		NotifyOnSucceeded: n.NotifyOnSucceeded, NotifyOnFailed: n.NotifyOnFailed, NotifyOnInactive: n.NotifyOnInactive}
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Transfer
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "transfer"); err != nil {
		return err
	}
	tr := domain.TransferRequest{
		Submission: submission(req.SubmissionID, req.Label, req.Deadline, req.Notify),
		Source:     req.SourceEndpoint, Destination: req.DestinationEndpoint,
		SyncLevel: req.SyncLevel, ChecksumAlgorithm: req.ChecksumAlgorithm, Tar: req.Tar,
		VerifyChecksum: req.VerifyChecksum, PreserveTimestamp: req.PreserveTimestamp, EncryptData: req.EncryptData, Compress: req.Compress,
		DeleteDestinationExtra: req.DeleteDestinationExtra, SkipSourceErrors: req.SkipSourceErrors, FailOnQuotaErrors: req.FailOnQuotaErrors,
	}
	for _, f := range req.FilterRules {
		if err := dataType(f.DataType, "filter_rule"); err != nil {
			return err
		}
		tr.FilterRules = append(tr.FilterRules, domain.FilterRule{Method: f.Method, Name: f.Name, Type: f.Type})
	}
	for _, it := range req.Data {
		if err := dataType(it.DataType, "transfer_item"); err != nil {
			return err
		}
		tr.Items = append(tr.Items, domain.Item{Src: it.SourcePath, Dst: it.DestinationPath, Recursive: it.Recursive})
	}
	for _, d := range req.Destinations {
		if err := dataType(d.DataType, "transfer_destination"); err != nil {
			return err
		}
		tr.Destinations = append(tr.Destinations, domain.DestinationSpec{Endpoint: d.Endpoint, Paths: d.DestinationPaths})
	}
	t, created, err := s.Tasks.SubmitTransfer(r.Context(), c.user, tr)
	if err != nil {
		return err
	}
	return submitted(w, r, t, created)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Delete
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "delete"); err != nil {
		return err
	}
	dr := domain.DeleteRequest{Submission: submission(req.SubmissionID, req.Label, req.Deadline, req.Notify),
		Endpoint: req.Endpoint, Recursive: req.Recursive, IgnoreMissing: req.IgnoreMissing}
	for _, it := range req.Data {
		if err := dataType(it.DataType, "delete_item"); err != nil {
			return err
		}
		dr.Paths = append(dr.Paths, it.Path)
	}
	t, created, err := s.Tasks.SubmitDelete(r.Context(), c.user, dr)
	if err != nil {
		return err
	}
	return submitted(w, r, t, created)
}

func (s *Server) taskList(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseTaskQuery(r.URL.Query())
	if err != nil {
		return err
	}
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	f := domain.TaskFilter{Status: q.Status, Type: q.Type, Label: q.Label, Newest: !q.Oldest}
	ts, total, err := s.Store.Tasks(r.Context(), c.user.ID, f, page)
	if err != nil {
		return err
	}
	names := s.endpointNames(r)
	doc := api.TaskList{DataType: "task_list", PageInfo: pageInfo(page, len(ts), total), Data: make([]api.Task, len(ts))}
	for i, t := range ts {
		doc.Data[i] = s.taskDoc(t, names)
	}
	return reply(w, http.StatusOK, doc)
}

func pageInfo(p domain.Page, n, total int) api.PageInfo {
	return api.PageInfo{Length: n, Limit: p.Limit, Offset: p.Offset, Total: total}
}

func (s *Server) task(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	where, err := s.where.get(t.ID, func() (itemsWhere, error) {
		items, err := s.Store.TaskItems(r.Context(), t.ID)
		src, dst := itemPaths(items)
		return itemsWhere{src, dst}, err
	})
	if err != nil {
		return err
	}
	d := s.taskDoc(t, s.endpointNames(r))
	d.SourcePath, d.DestinationPath = where.src, where.dst
	return reply(w, http.StatusOK, d)
}

// itemsWhere is where a task's items are (itemPaths).
type itemsWhere struct{ src, dst string }

// whereCache keeps where tasks' items are, which never changes once a
// task is submitted, so that polling a task (ferry task wait) does not
// read all its items each time. It forgets everything when full.
type whereCache struct {
	mu sync.Mutex
	m  map[string]itemsWhere
}

// whereCacheSize bounds whereCache: tasks polled at once, with room.
const whereCacheSize = 4096

// get returns id's entry, computing it with load the first time.
func (c *whereCache) get(id string, load func() (itemsWhere, error)) (itemsWhere, error) {
	c.mu.Lock()
	w, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return w, nil
	}
	w, err := load()
	if err != nil {
		return w, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= whereCacheSize {
		c.m = map[string]itemsWhere{}
	}
	c.m[id] = w
	return w, nil
}

// itemPaths says where items are: the one item's source and destination
// paths, or the deepest directories that hold all the sources and all
// the destinations ("" when the items have none, as in a delete task).
func itemPaths(items []domain.Item) (src, dst string) {
	if len(items) == 1 {
		return items[0].Src, items[0].Dst
	}
	for i, it := range items {
		s, d := parentDir(it.Src), parentDir(it.Dst)
		if i > 0 {
			s, d = commonDir(src, s), commonDir(dst, d)
		}
		src, dst = s, d
	}
	return src, dst
}

// parentDir is the directory holding p, with a trailing slash; "" for "".
func parentDir(p string) string {
	if p == "" {
		return ""
	}
	return strings.TrimSuffix(path.Dir(strings.TrimSuffix(p, "/")), "/") + "/"
}

// commonDir is the deepest directory that holds both directories a and
// b (each with a trailing slash); "" if either is "".
func commonDir(a, b string) string {
	if a == "" || b == "" {
		return ""
	}
	x, y := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(x)-1 && n < len(y)-1 && x[n] == y[n] {
		n++
	}
	return strings.Join(x[:n], "/") + "/"
}

// endpointNames returns a lookup of endpoint display names by ID that
// asks the store once per endpoint; a deleted endpoint has no name.
func (s *Server) endpointNames(r *http.Request) func(id string) string {
	names := map[string]string{"": ""}
	return func(id string) string {
		n, ok := names[id]
		if !ok {
			if ep, err := s.Store.Endpoint(r.Context(), id); err == nil {
				n = ep.DisplayName()
			}
			names[id] = n
		}
		return n
	}
}

func (s *Server) taskDoc(t domain.Task, names func(string) string) api.Task {
	o := t.Options
	d := api.Task{
		DataType: "task", TaskID: t.ID, Type: t.Type, Label: t.Label, Status: t.Status, NiceStatus: t.NiceStatus,
		CancelRequested: t.CancelRequested, SubmissionID: t.SubmissionID,
		RequestTime: t.RequestTime, CompletionTime: t.CompletionTime, Deadline: t.Deadline,
		SourceEndpointID: t.SrcEndpoint, SourceEndpointDisplayName: names(t.SrcEndpoint),
		DestinationEndpointID: t.DstEndpoint, DestinationEndpointDisplayName: names(t.DstEndpoint),

		Files: t.Files, Directories: t.Directories, FilesTransferred: t.FilesTransferred,
		FilesSkipped: t.FilesSkipped, BytesTransferred: t.BytesTransferred, BytesTotal: t.BytesTotal,
		BytesChecksummed: t.BytesChecksummed, Faults: t.Faults,
		SubtasksTotal: t.Files, SubtasksSucceeded: t.FilesTransferred + t.FilesSkipped,
		SubtasksFailed: t.FilesFailed,

		VerifyChecksum: o.VerifyChecksum, ChecksumAlgorithm: o.ChecksumAlgorithm, EncryptData: o.EncryptData,
		PreserveTimestamp: o.PreserveTimestamp, Tar: o.Tar, Compress: o.Compress, DeleteDestinationExtra: o.DeleteDestinationExtra,
		SkipSourceErrors: o.SkipSourceErrors, FailOnQuotaErrors: o.FailOnQuotaErrors,
		NotifyOnSucceeded: o.NotifyOnSucceeded, NotifyOnFailed: o.NotifyOnFailed,
		NotifyOnInactive: o.NotifyOnInactive, IgnoreMissing: o.IgnoreMissing,
	}
	if domain.Done(t.Status) {
		d.NiceStatus = ""
	}
	for _, dd := range t.Destinations {
		d.Destinations = append(d.Destinations, api.TaskDestination{DataType: "task_destination",
			EndpointID: dd.Endpoint, EndpointDisplayName: names(dd.Endpoint), DestinationPaths: dd.Paths,
			FilesTransferred: dd.FilesTransferred, FilesSkipped: dd.FilesSkipped, FilesFailed: dd.FilesFailed,
			BytesTransferred: dd.BytesTransferred})
	}
	if t.FatalError != nil {
		d.FatalError = &api.FatalError{Code: t.FatalError.Code, Description: t.FatalError.Description}
	}
	d.SubtasksPending = max(0, d.SubtasksTotal-d.SubtasksSucceeded-d.SubtasksFailed)
	if t.Type == domain.TypeTransfer {
		d.SyncLevel = o.SyncLevel.API()
	}
	for _, f := range o.FilterRules {
		d.FilterRules = append(d.FilterRules, api.FilterRule{DataType: "filter_rule", Method: f.Method, Name: f.Name, Type: f.Type})
	}
	if !t.StartTime.IsZero() {
		end := t.CompletionTime
		if end.IsZero() {
			end = s.Now()
		}
		if secs := end.Sub(t.StartTime).Seconds(); secs > 0 {
			d.EffectiveBytesPerSecond = int64(float64(t.BytesTransferred) / secs)
		}
	}
	return d
}

func (s *Server) updateTask(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskUpdate
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "task"); err != nil {
		return err
	}
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if domain.Done(t.Status) {
		return domain.Errorf(domain.EConflict, "task %s is %s: it can no longer change", t.ID, t.Status)
	}
	if req.Label != nil {
		if err := checkText("label", *req.Label, 128); err != nil {
			return err
		}
		t.Label = *req.Label
	}
	if req.Deadline != nil {
		if !req.Deadline.After(s.Now()) {
			return domain.Errorf(domain.EInvalid, "deadline %s is in the past", req.Deadline.Format(time.RFC3339))
		}
		t.Deadline = *req.Deadline
	}
	if err := s.Store.UpdateTask(r.Context(), c.user.ID, t.ID, t.Label, t.Deadline); err != nil {
		return err
	}
	return result(w, r, "result", "Updated", "the task is updated")
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Cancel
	if err := decode(r, &req, true); err != nil {
		return err
	}
	if err := dataType(req.DataType, "cancel"); err != nil {
		return err
	}
	id := r.PathValue("id")
	t, err := s.Store.Task(r.Context(), c.user.ID, id)
	if err != nil {
		return err
	}
	if domain.Done(t.Status) {
		return result(w, r, "result", "TaskComplete", fmt.Sprintf("the task was already %s", t.Status))
	}
	if req.Path != "" {
		p, err := domain.CleanPath(req.Path, "")
		if err != nil {
			return err
		}
		if err := s.Store.CancelFile(r.Context(), c.user.ID, id, p); err != nil {
			return err
		}
		return result(w, r, "result", "FileCanceled", fmt.Sprintf("%s will not be transferred", p))
	}
	if t, err = s.Store.RequestCancel(r.Context(), c.user.ID, id, s.Now()); err != nil {
		return err
	}
	msg := "the task is being canceled"
	if domain.Done(t.Status) {
		msg = "the task is canceled"
	}
	return result(w, r, "result", "Canceled", msg)
}

// resumeTask runs an INACTIVE task again.
func (s *Server) resumeTask(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.Tasks.ResumeTask(r.Context(), c.user, r.PathValue("id")); err != nil {
		return err
	}
	return result(w, r, "result", "Resumed", "the task is queued again")
}

func (s *Server) eventList(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParsePage(r.URL.Query())
	if err != nil {
		return err
	}
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	evs, total, err := s.Store.Events(r.Context(), t.ID, page)
	if err != nil {
		return err
	}
	doc := api.EventList{DataType: "event_list", PageInfo: pageInfo(page, len(evs), total), Data: make([]api.Event, len(evs))}
	for i, e := range evs {
		doc.Data[i] = api.Event{DataType: "event", Code: e.Code, Description: e.Description, Details: e.Details, IsError: e.IsError, Time: e.Time}
	}
	return reply(w, http.StatusOK, doc)
}

// taskFiles reads the marker-paged page the request asks for of the
// task's file records in state; it returns them, the marker and the next.
func (s *Server) taskFiles(r *http.Request, c *call, state string) ([]domain.File, int64, int64, error) {
	q, err := api.ParseMarkerQuery(r.URL.Query())
	if err != nil {
		return nil, 0, 0, err
	}
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return nil, 0, 0, err
	}
	limit := domain.Page{Limit: q.Limit}.Normal().Limit
	files, next, err := s.Store.Files(r.Context(), t.ID, state, q.Marker, limit)
	return files, q.Marker, next, err
}

func (s *Server) successfulTransfers(w http.ResponseWriter, r *http.Request, c *call) error {
	files, marker, next, err := s.taskFiles(r, c, domain.FileSucceeded)
	if err != nil {
		return err
	}
	doc := api.SuccessfulTransfers{DataType: "successful_transfers", Marker: marker, NextMarker: next, Data: make([]api.SuccessfulTransfer, len(files))}
	for i, f := range files {
		doc.Data[i] = api.SuccessfulTransfer{DataType: "successful_transfer", SourcePath: f.Src, DestinationPath: f.Dst, Size: f.Size, ChecksumAlgorithm: f.Algorithm, Checksum: f.Checksum}
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) skippedErrors(w http.ResponseWriter, r *http.Request, c *call) error {
	files, marker, next, err := s.taskFiles(r, c, domain.FileSkippedError)
	if err != nil {
		return err
	}
	doc := api.SkippedErrors{DataType: "skipped_errors", Marker: marker, NextMarker: next, Data: make([]api.SkippedError, len(files))}
	for i, f := range files {
		doc.Data[i] = api.SkippedError{DataType: "skipped_error", SourcePath: f.Src, DestinationPath: f.Dst, ErrorDetails: f.Error, ErrorTime: f.Time}
	}
	return reply(w, http.StatusOK, doc)
}

// deletedPaths lists what a task deleted at its destinations because the
// source does not have it (delete_destination_extra).
func (s *Server) deletedPaths(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseMarkerQuery(r.URL.Query())
	if err != nil {
		return err
	}
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	ds, next, err := s.Store.Deletions(r.Context(), t.ID, q.Marker, domain.Page{Limit: q.Limit}.Normal().Limit)
	if err != nil {
		return err
	}
	doc := api.DeletedPaths{DataType: "deleted_paths", Marker: q.Marker, NextMarker: next, Data: make([]api.DeletedPath, len(ds))}
	for i, d := range ds {
		doc.Data[i] = api.DeletedPath{DataType: "deleted_path", DestinationPath: d.Path, Type: "file", Size: d.Size, Time: d.Time}
		if d.Dir {
			doc.Data[i].Type = "dir"
		}
		if d.Dest < len(t.Destinations) {
			doc.Data[i].DestinationEndpointID = t.Destinations[d.Dest].Endpoint
		}
	}
	return reply(w, http.StatusOK, doc)
}

// partialPaths lists the files a task started and did not finish: what
// a task that is over left partial at the destination.
func (s *Server) partialPaths(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseMarkerQuery(r.URL.Query())
	if err != nil {
		return err
	}
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	ps, next, err := s.Store.Partials(r.Context(), t.ID, q.Marker, q.Limit)
	if err != nil {
		return err
	}
	doc := api.PartialPaths{DataType: "partial_paths", Marker: q.Marker, NextMarker: next, Data: make([]api.PartialPath, len(ps))}
	for i, p := range ps {
		doc.Data[i] = api.PartialPath{DataType: "partial_path", SourcePath: p.Src, Size: p.Size, BytesAtDestination: p.Have}
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) failedTransfers(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if len(t.Destinations) > 0 {
		return s.destFailures(w, r, t)
	}
	files, marker, next, err := s.taskFiles(r, c, domain.FileFailed)
	if err != nil {
		return err
	}
	doc := api.FailedTransfers{DataType: "failed_transfers", Marker: marker, NextMarker: next, Data: make([]api.FailedTransfer, len(files))}
	for i, f := range files {
		doc.Data[i] = api.FailedTransfer{DataType: "failed_transfer", SourcePath: f.Src, DestinationPath: f.Dst, Size: f.Size, Error: f.Error, Time: f.Time}
	}
	return reply(w, http.StatusOK, doc)
}

// destFailures answers failed_transfers for a task with several
// destinations: each file that failed at a destination, naming it.
func (s *Server) destFailures(w http.ResponseWriter, r *http.Request, t domain.Task) error {
	q, err := api.ParseMarkerQuery(r.URL.Query())
	if err != nil {
		return err
	}
	limit := domain.Page{Limit: q.Limit}.Normal().Limit
	files, next, err := s.Store.DestFiles(r.Context(), t.ID, -1, domain.FileFailed, q.Marker, limit)
	if err != nil {
		return err
	}
	doc := api.FailedTransfers{DataType: "failed_transfers", Marker: q.Marker, NextMarker: next, Data: make([]api.FailedTransfer, len(files))}
	for i, f := range files {
		doc.Data[i] = api.FailedTransfer{DataType: "failed_transfer", SourcePath: f.Src, DestinationPath: f.Dst, Size: f.Size, Error: f.Error, Time: f.Time}
		if f.Dest < len(t.Destinations) {
			doc.Data[i].DestinationEndpointID = t.Destinations[f.Dest].Endpoint
		}
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) pauseInfo(w http.ResponseWriter, r *http.Request, c *call) error {
	pi, err := s.Tasks.PauseInfo(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	doc := api.PauseInfo{DataType: "pause_info", TaskID: pi.Task.ID, IsPaused: pi.Task.Status == domain.StatusInactive}
	if !doc.IsPaused {
		return reply(w, http.StatusOK, doc)
	}
	doc.NiceStatus, doc.Description = pi.Task.NiceStatus, pi.Description
	for _, pe := range pi.Endpoints {
		doc.Endpoints = append(doc.Endpoints, api.PausedEndpoint{DataType: "paused_endpoint", EndpointID: pe.ID, DisplayName: pe.DisplayName, Resume: pe.Resume})
	}
	return reply(w, http.StatusOK, doc)
}
