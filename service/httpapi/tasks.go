package httpapi

import (
	"crypto/rand"
	"net/http"
	"strings"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

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
	ts, total, err := s.Tasks.Tasks(r.Context(), c.user, f, page)
	if err != nil {
		return err
	}
	doc := api.TaskList{DataType: "task_list", PageInfo: pageInfo(page, len(ts), total), Data: make([]api.Task, len(ts))}
	for i, t := range ts {
		doc.Data[i] = taskDoc(t)
	}
	return reply(w, http.StatusOK, doc)
}

func pageInfo(p domain.Page, n, total int) api.PageInfo {
	return api.PageInfo{Length: n, Limit: p.Limit, Offset: p.Offset, Total: total}
}

func (s *Server) task(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.Tasks.Task(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, taskDoc(t))
}

func taskDoc(t domain.TaskView) api.Task {
	o := t.Options
	d := api.Task{
		DataType: "task", TaskID: t.ID, Type: t.Type, Label: t.Label, Status: t.Status, NiceStatus: t.NiceStatus,
		CancelRequested: t.CancelRequested, SubmissionID: t.SubmissionID,
		RequestTime: t.RequestTime, CompletionTime: t.CompletionTime, Deadline: t.Deadline,
		SourceEndpointID: t.SrcEndpoint, SourceEndpointDisplayName: t.SrcName,
		DestinationEndpointID: t.DstEndpoint, DestinationEndpointDisplayName: t.DstName,
		SourcePath: t.SrcPath, DestinationPath: t.DstPath,

		Files: t.Files, Directories: t.Directories, FilesTransferred: t.FilesTransferred,
		FilesSkipped: t.FilesSkipped, BytesTransferred: t.BytesTransferred, BytesTotal: t.BytesTotal,
		BytesChecksummed: t.BytesChecksummed, Faults: t.Faults,
		SubtasksTotal: t.Files, SubtasksSucceeded: t.FilesTransferred + t.FilesSkipped,
		SubtasksFailed: t.FilesFailed, EffectiveBytesPerSecond: t.BytesPerSecond,

		VerifyChecksum: o.VerifyChecksum, ChecksumAlgorithm: o.ChecksumAlgorithm, EncryptData: o.EncryptData,
		PreserveTimestamp: o.PreserveTimestamp, Tar: o.Tar, Compress: o.Compress, DeleteDestinationExtra: o.DeleteDestinationExtra,
		SkipSourceErrors: o.SkipSourceErrors, FailOnQuotaErrors: o.FailOnQuotaErrors,
		NotifyOnSucceeded: o.NotifyOnSucceeded, NotifyOnFailed: o.NotifyOnFailed,
		NotifyOnInactive: o.NotifyOnInactive, IgnoreMissing: o.IgnoreMissing,
	}
	if domain.Done(t.Status) {
		d.NiceStatus = ""
	}
	for i, dd := range t.Destinations {
		d.Destinations = append(d.Destinations, api.TaskDestination{DataType: "task_destination",
			EndpointID: dd.Endpoint, EndpointDisplayName: t.DestNames[i], DestinationPaths: dd.Paths,
			FilesTransferred: dd.FilesTransferred, FilesSkipped: dd.FilesSkipped, FilesFailed: dd.FilesFailed,
			BytesTransferred: dd.BytesTransferred})
	}
	if t.FatalError != nil {
		d.FatalError = &api.FatalError{Code: t.FatalError.Code, Description: t.FatalError.Description}
	}
	if t.Type == domain.TypeDelete { // its subtasks are its paths, files and directories what it removed
		d.SubtasksTotal = t.Paths()
	}
	d.SubtasksPending = max(0, d.SubtasksTotal-d.SubtasksSucceeded-d.SubtasksFailed)
	if t.Type == domain.TypeTransfer {
		d.SyncLevel = o.SyncLevel.API()
	}
	for _, f := range o.FilterRules {
		d.FilterRules = append(d.FilterRules, api.FilterRule{DataType: "filter_rule", Method: f.Method, Name: f.Name, Type: f.Type})
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
	if err := s.Tasks.UpdateTask(r.Context(), c.user, r.PathValue("id"), req.Label, req.Deadline); err != nil {
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
	res, err := s.Tasks.CancelTask(r.Context(), c.user, r.PathValue("id"), req.Path)
	if err != nil {
		return err
	}
	return result(w, r, "result", res.Code, res.Message)
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
	page := domain.Page{Limit: q.Limit, Offset: q.Offset}.Normal()
	evs, total, err := s.Tasks.Events(r.Context(), c.user, r.PathValue("id"), page)
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
	files, next, err := s.Tasks.TaskFiles(r.Context(), c.user, r.PathValue("id"), state, q.Marker, q.Limit)
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
	ds, next, err := s.Tasks.DeletedPaths(r.Context(), c.user, r.PathValue("id"), q.Marker, q.Limit)
	if err != nil {
		return err
	}
	doc := api.DeletedPaths{DataType: "deleted_paths", Marker: q.Marker, NextMarker: next, Data: make([]api.DeletedPath, len(ds))}
	for i, d := range ds {
		doc.Data[i] = api.DeletedPath{DataType: "deleted_path", DestinationPath: d.Path, Type: "file", Size: d.Size, Time: d.Time,
			DestinationEndpointID: d.DestEndpoint}
		if d.Dir {
			doc.Data[i].Type = "dir"
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
	ps, next, err := s.Tasks.PartialPaths(r.Context(), c.user, r.PathValue("id"), q.Marker, q.Limit)
	if err != nil {
		return err
	}
	doc := api.PartialPaths{DataType: "partial_paths", Marker: q.Marker, NextMarker: next, Data: make([]api.PartialPath, len(ps))}
	for i, p := range ps {
		doc.Data[i] = api.PartialPath{DataType: "partial_path", SourcePath: p.Src, Size: p.Size, BytesAtDestination: p.Have}
	}
	return reply(w, http.StatusOK, doc)
}

// failedTransfers lists the files that failed, each naming its
// destination endpoint for a task with several.
func (s *Server) failedTransfers(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseMarkerQuery(r.URL.Query())
	if err != nil {
		return err
	}
	files, next, err := s.Tasks.FailedTransfers(r.Context(), c.user, r.PathValue("id"), q.Marker, q.Limit)
	if err != nil {
		return err
	}
	doc := api.FailedTransfers{DataType: "failed_transfers", Marker: q.Marker, NextMarker: next, Data: make([]api.FailedTransfer, len(files))}
	for i, f := range files {
		doc.Data[i] = api.FailedTransfer{DataType: "failed_transfer", SourcePath: f.Src, DestinationPath: f.Dst, Size: f.Size, Error: f.Error, Time: f.Time,
			DestinationEndpointID: f.DestEndpoint}
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
