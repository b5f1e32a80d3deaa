package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"ferry/checksum"
	"ferry/internal/synclevel"
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

// itemPath cleans a required path of the i-th submitted item; what is
// the path's role in words ("source path").
func itemPath(what string, i int, p string) (string, error) {
	if p == "" {
		return "", domain.Errorf(domain.EInvalid, "item %d has no %s", i+1, what)
	}
	c, err := domain.CleanPath(p, "")
	if err != nil {
		return "", domain.Errorf(domain.EInvalid, "%s: %s", what, domain.ErrorMessage(err))
	}
	return c, nil
}

func (s *Server) submissionID(w http.ResponseWriter, r *http.Request, c *call) error {
	return reply(w, http.StatusOK, api.SubmissionID{DataType: "submission_id", Value: rand.Text()})
}

// newTask checks what transfers and deletes share and starts their task.
func (s *Server) newTask(typ, submissionID, label string, deadline time.Time, n api.Notify, items int) (domain.Task, error) {
	t := domain.Task{Type: typ, SubmissionID: submissionID, Label: label, Deadline: deadline, RequestTime: s.Now()}
	if deadline.IsZero() && s.DefaultDeadline > 0 {
		t.Deadline = t.RequestTime.Add(s.DefaultDeadline)
	}
	if err := checkText("submission_id", submissionID, 128); err != nil {
		return t, err
	}
	if t.SubmissionID == "" {
		t.SubmissionID = rand.Text()
	}
	if err := checkText("label", label, 128); err != nil {
		return t, err
	}
	if !deadline.IsZero() && !deadline.After(t.RequestTime) {
		return t, domain.Errorf(domain.EInvalid, "deadline %s is in the past", deadline.Format(time.RFC3339))
	}
	if items == 0 {
		return t, domain.Errorf(domain.EInvalid, "no items: a task moves at least one")
	}
	orTrue := func(b *bool) bool { return b == nil || *b }
	t.Options.NotifyOnSucceeded = orTrue(n.NotifyOnSucceeded)
	t.Options.NotifyOnFailed = orTrue(n.NotifyOnFailed)
	t.Options.NotifyOnInactive = orTrue(n.NotifyOnInactive)
	return t, nil
}

// submit stores a new task and answers with its ID, or with the ID of the
// task an earlier submission with the same ID made.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, c *call, t *domain.Task) error {
	t.UserID = c.user.ID
	status, code, msg := http.StatusAccepted, "Accepted", "the task is accepted"
	if err := s.Store.CreateTask(r.Context(), t); domain.ErrorCode(err) == domain.EDuplicate {
		status, code, msg = http.StatusOK, domain.EDuplicate, "a task with this submission_id exists"
	} else if err != nil {
		return err
	} else {
		s.queued()
	}
	dt := strings.ToLower(t.Type) + "_result"
	return reply(w, status, api.SubmitResult{
		DataType: dt, Code: code, Message: msg, RequestID: c.id, Resource: r.URL.Path,
		SubmissionID: t.SubmissionID, TaskID: t.ID,
		TaskLink: api.Link{DataType: "link", Href: "task/" + t.ID, Rel: "related", Resource: "task", Title: "related task"},
	})
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Transfer
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "transfer"); err != nil {
		return err
	}
	t, err := s.newTask(domain.TypeTransfer, req.SubmissionID, req.Label, req.Deadline, req.Notify, len(req.Data))
	if err != nil {
		return err
	}
	o := &t.Options
	if o.SyncLevel, err = synclevel.FromAPI(req.SyncLevel); err != nil {
		return domain.Errorf(domain.EInvalid, "%v", err)
	}
	if req.ChecksumAlgorithm != "" {
		if o.ChecksumAlgorithm, err = checksum.Canonical(req.ChecksumAlgorithm); err != nil {
			return domain.Errorf(domain.EInvalid, "checksum algorithm %q: want one of %s", req.ChecksumAlgorithm, strings.Join(checksum.Names(), ", "))
		}
	}
	o.VerifyChecksum = req.VerifyChecksum
	o.EncryptData = req.EncryptData
	o.PreserveTimestamp = req.PreserveTimestamp
	o.Compress = req.Compress
	if req.Tar != "" {
		o.Tar = strings.ToLower(req.Tar)
		if !slices.Contains(domain.TarModes, o.Tar) {
			return domain.Errorf(domain.EInvalid, "tar %q: want one of %s", req.Tar, strings.Join(domain.TarModes, ", "))
		}
	}
	o.DeleteDestinationExtra = req.DeleteDestinationExtra
	o.SkipSourceErrors, o.FailOnQuotaErrors = req.SkipSourceErrors, req.FailOnQuotaErrors
	for i, f := range req.FilterRules {
		if err := checkFilterRule(i, f); err != nil {
			return err
		}
		o.FilterRules = append(o.FilterRules, domain.FilterRule{Method: f.Method, Name: f.Name, Type: f.Type})
	}
	for i, it := range req.Data {
		if err := dataType(it.DataType, "transfer_item"); err != nil {
			return err
		}
		src, err := itemPath("source path", i, it.SourcePath)
		if err != nil {
			return err
		}
		dst, err := itemPath("destination path", i, it.DestinationPath)
		if err != nil {
			return err
		}
		t.Items = append(t.Items, domain.Item{Src: src, Dst: dst, Recursive: it.Recursive})
	}
	src, err := s.visibleEndpoint(r, c, "source endpoint", req.SourceEndpoint)
	if err != nil {
		return err
	}
	if src.Via != "" {
		return src.ViaError("be a transfer's source")
	}
	dsts, err := s.destinations(r, c, req, t.Items)
	if err != nil {
		return err
	}
	if o.SkipSourceErrors && (len(dsts) > 1 || dsts[0].ep.Via != "") {
		return domain.Errorf(domain.EInvalid, "a transfer to several destinations, or to one behind a head node, "+
			"cannot skip source errors yet; submit it without skipping them")
	}
	t.SrcEndpoint, t.DstEndpoint = src.ID, dsts[0].ep.ID
	if len(dsts) == 1 {
		t.Items = dsts[0].items // one destination with its own paths is the single shape
	} else {
		for _, d := range dsts {
			t.Destinations = append(t.Destinations, domain.Destination{Endpoint: d.ep.ID, Paths: d.paths})
		}
	}
	for _, d := range dsts {
		if err := s.checkTransfer(r, c, src, d.ep, d.items, t.Options); err != nil {
			return err
		}
	}
	return s.submit(w, r, c, &t)
}

// dest is one destination of a submitted transfer: its endpoint, its own
// paths (nil: the items'), and the items as they go there.
type dest struct {
	ep    domain.Endpoint
	paths []string
	items []domain.Item
}

// destinations reads a submission's destination_endpoint or its
// destinations, and refuses two destinations that are one place (the
// same storage and paths of which one is or holds the other).
func (s *Server) destinations(r *http.Request, c *call, req api.Transfer, items []domain.Item) ([]dest, error) {
	if len(req.Destinations) == 0 {
		ep, err := s.visibleEndpoint(r, c, "destination endpoint", req.DestinationEndpoint)
		return []dest{{ep: ep, items: items}}, err
	}
	if req.DestinationEndpoint != "" {
		return nil, domain.Errorf(domain.EInvalid, "destination_endpoint and destinations: give one or the other")
	}
	if len(req.Destinations) > domain.MaxDestinations {
		return nil, domain.Errorf(domain.EInvalid, "destinations: %d of them, at most %d", len(req.Destinations), domain.MaxDestinations)
	}
	var out []dest
	for i, d := range req.Destinations {
		if err := dataType(d.DataType, "transfer_destination"); err != nil {
			return nil, err
		}
		ep, err := s.visibleEndpoint(r, c, fmt.Sprintf("endpoint for destination %d", i+1), d.Endpoint)
		if err != nil {
			return nil, err
		}
		nd := dest{ep: ep, items: items}
		if d.DestinationPaths != nil {
			if len(d.DestinationPaths) != len(items) {
				return nil, domain.Errorf(domain.EInvalid, "destination %d has %d paths for %d items: want one per item",
					i+1, len(d.DestinationPaths), len(items))
			}
			for j, p := range d.DestinationPaths {
				cp, err := itemPath(fmt.Sprintf("destination path for destination %d", i+1), j, p)
				if err != nil {
					return nil, err
				}
				nd.paths = append(nd.paths, cp)
			}
			nd.items = domain.Destination{Paths: nd.paths}.DestItems(items)
		}
		for k, prev := range out {
			if !sameStorage(prev.ep, ep) {
				continue
			}
			for j := range items {
				if a, b := path.Clean(prev.items[j].Dst), path.Clean(nd.items[j].Dst); a == b || inside(a, b) || inside(b, a) {
					return nil, domain.Errorf(domain.EInvalid, "destinations %d and %d are one place: %s on %s",
						k+1, i+1, nd.items[j].Dst, ep.DisplayName())
				}
			}
		}
		out = append(out, nd)
	}
	return out, nil
}

// inside reports a clean path p below the clean directory dir.
func inside(p, dir string) bool { return dir == "/" || strings.HasPrefix(p, dir+"/") }

// checkItems is how many items of a submission the endpoints are asked
// about; the worker's listing finds what is wrong with the others.
const checkItems = 100

// checkTransfer refuses a transfer that would write over its own source
// or cannot work. Paths on one storage (one endpoint, or endpoints that
// share a server) are compared at once; then the endpoints are asked, as
// the engine asks them before it writes anything, while they answer
// within CheckWithin. An endpoint that does not answer in time, or that
// is not activated, leaves the question to the task's first listing,
// which fails it with the same message. A destination behind a relay is
// not asked: the service cannot reach it.
func (s *Server) checkTransfer(r *http.Request, c *call, src, dst domain.Endpoint, items []domain.Item, o domain.Options) error {
	if sameStorage(src, dst) {
		for _, it := range items {
			if err := s.Ops.Overlap(dst, it, o); err != nil {
				return err
			}
		}
	}
	within := s.CheckWithin
	if within < 0 || dst.Via != "" {
		return nil // a destination behind a relay cannot be asked: the head node's copy checks it
	}
	if within == 0 {
		within = 2 * time.Second
	}
	var logins [2]domain.Login
	for i, ep := range []domain.Endpoint{src, dst} {
		l, err := s.endpointLogin(r, c, ep)
		if err != nil {
			return nil // not activated: the task waits INACTIVE
		}
		logins[i] = l
	}
	ctx, cancel := context.WithTimeout(r.Context(), within)
	defer cancel()
	err := s.Ops.CheckTransfer(ctx, src, dst, logins[0], logins[1], items[:min(len(items), checkItems)], o)
	switch domain.ErrorCode(err) {
	case domain.EInvalid, domain.ENotFound:
		return err
	}
	if err != nil {
		s.Logger.Info("submission check left to the worker", "err", err)
	}
	return nil
}

// sameStorage reports endpoints that are one, or share a server.
func sameStorage(a, b domain.Endpoint) bool {
	if a.ID == b.ID {
		return true
	}
	for _, x := range a.Servers {
		for _, y := range b.Servers {
			if strings.EqualFold(strings.TrimSuffix(x, "/"), strings.TrimSuffix(y, "/")) {
				return true
			}
		}
	}
	return false
}

func checkFilterRule(i int, f api.FilterRule) error {
	if err := dataType(f.DataType, "filter_rule"); err != nil {
		return err
	}
	if f.Method != "include" && f.Method != "exclude" {
		return domain.Errorf(domain.EInvalid, "filter rule %d: method %q: want include or exclude", i+1, f.Method)
	}
	if f.Type != "" && f.Type != "file" && f.Type != "dir" {
		return domain.Errorf(domain.EInvalid, "filter rule %d: type %q: want file, dir or nothing", i+1, f.Type)
	}
	if _, err := path.Match(f.Name, ""); f.Name == "" || strings.Contains(f.Name, "/") || err != nil {
		return domain.Errorf(domain.EInvalid, "%s %q: want a glob of base names", f.Method, f.Name)
	}
	return nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Delete
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "delete"); err != nil {
		return err
	}
	t, err := s.newTask(domain.TypeDelete, req.SubmissionID, req.Label, req.Deadline, req.Notify, len(req.Data))
	if err != nil {
		return err
	}
	t.Options.IgnoreMissing = req.IgnoreMissing
	for i, it := range req.Data {
		if err := dataType(it.DataType, "delete_item"); err != nil {
			return err
		}
		p, err := itemPath("path", i, it.Path)
		if err != nil {
			return err
		}
		if p == "/" {
			return domain.Errorf(domain.EInvalid, "the root of an endpoint cannot be deleted")
		}
		t.Items = append(t.Items, domain.Item{Src: p, Recursive: req.Recursive})
	}
	ep, err := s.visibleEndpoint(r, c, "endpoint", req.Endpoint)
	if err != nil {
		return err
	}
	if ep.Via != "" {
		return ep.ViaError("delete")
	}
	t.SrcEndpoint = ep.ID
	return s.submit(w, r, c, &t)
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

// resumeTask runs an INACTIVE task again, once the user has mended what
// it waited for (space at a full destination). A transfer that is over
// cannot resume: the conflict names the command that finishes its job.
func (s *Server) resumeTask(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.Store.ResumeTask(r.Context(), c.user.ID, r.PathValue("id"), s.Now()); err != nil {
		if domain.ErrorCode(err) != domain.EConflict {
			return err
		}
		return s.finishAdvice(r, c, err)
	}
	s.queued()
	return result(w, r, "result", "Resumed", "the task is queued again")
}

// finishAdvice is the conflict of resuming a task that is not INACTIVE,
// with the command that finishes its job when it is over.
func (s *Server) finishAdvice(r *http.Request, c *call, conflict error) error {
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil || !domain.Done(t.Status) {
		return cmp.Or(err, conflict)
	}
	if t.Items, err = s.Store.TaskItems(r.Context(), t.ID); err != nil {
		return err
	}
	advice := domain.FinishAdvice(t)
	if advice == "" {
		return conflict
	}
	return domain.Errorf(domain.EConflict, "task %s is %s: there is nothing to resume; %s", t.ID, t.Status, advice)
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
