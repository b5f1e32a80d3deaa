package core

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"ferry/service/domain"
)

// Tasks is a page of u's tasks that f selects, and how many there are.
func (s *Service) Tasks(ctx context.Context, u domain.User, f domain.TaskFilter, p domain.Page) ([]domain.TaskView, int, error) {
	ts, total, err := s.Store.Tasks(ctx, u.ID, f, p)
	if err != nil {
		return nil, 0, err
	}
	names := s.endpointNames(ctx)
	out := make([]domain.TaskView, len(ts))
	for i, t := range ts {
		out[i] = s.taskView(t, names)
	}
	return out, total, nil
}

// Task is one of u's tasks, with where its items are.
func (s *Service) Task(ctx context.Context, u domain.User, id string) (domain.TaskView, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return domain.TaskView{}, err
	}
	where, err := s.where.get(t.ID, func() (itemsWhere, error) {
		items, err := s.Store.TaskItems(ctx, t.ID)
		src, dst := itemPaths(items)
		return itemsWhere{src, dst}, err
	})
	if err != nil {
		return domain.TaskView{}, err
	}
	v := s.taskView(t, s.endpointNames(ctx))
	v.SrcPath, v.DstPath = where.src, where.dst
	return v, nil
}

// taskView is t with its endpoints' names and its mean rate.
func (s *Service) taskView(t domain.Task, names func(string) string) domain.TaskView {
	v := domain.TaskView{Task: t, SrcName: names(t.SrcEndpoint), DstName: names(t.DstEndpoint)}
	for _, d := range t.Destinations {
		v.DestNames = append(v.DestNames, names(d.Endpoint))
	}
	if !t.StartTime.IsZero() {
		end := t.CompletionTime
		if end.IsZero() {
			end = s.now()
		}
		if secs := end.Sub(t.StartTime).Seconds(); secs > 0 {
			v.BytesPerSecond = int64(float64(t.BytesTransferred) / secs)
		}
	}
	return v
}

// endpointNames returns a lookup of endpoint display names by ID that
// asks the store once per endpoint; a deleted endpoint has no name.
func (s *Service) endpointNames(ctx context.Context) func(id string) string {
	names := map[string]string{"": ""}
	return func(id string) string {
		n, ok := names[id]
		if !ok {
			if ep, err := s.Store.Endpoint(ctx, id); err == nil {
				n = ep.DisplayName()
			}
			names[id] = n
		}
		return n
	}
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

// UpdateTask changes the label and deadline of a task of u's that is not
// over.
func (s *Service) UpdateTask(ctx context.Context, u domain.User, id string, label *string, deadline *time.Time) error {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return err
	}
	if domain.Done(t.Status) {
		return domain.Errorf(domain.EConflict, "task %s is %s: it can no longer change", t.ID, t.Status)
	}
	if label != nil {
		if err := checkText("label", *label, 128); err != nil {
			return err
		}
		t.Label = *label
	}
	if deadline != nil {
		if err := checkDeadline(*deadline, s.now()); err != nil {
			return err
		}
		t.Deadline = *deadline
	}
	return s.Store.UpdateTask(ctx, u.ID, t.ID, t.Label, t.Deadline)
}

// CancelTask cancels a task of u's or, with p, one file of it.
func (s *Service) CancelTask(ctx context.Context, u domain.User, id, p string) (domain.Result, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return domain.Result{}, err
	}
	if domain.Done(t.Status) {
		return domain.Result{Code: "TaskComplete", Message: fmt.Sprintf("the task was already %s", t.Status)}, nil
	}
	if p != "" {
		p, err := domain.CleanPath(p, "")
		if err != nil {
			return domain.Result{}, err
		}
		if err := s.Store.CancelFile(ctx, u.ID, id, p); err != nil {
			return domain.Result{}, err
		}
		return domain.Result{Code: "FileCanceled", Message: fmt.Sprintf("%s will not be transferred", p)}, nil
	}
	if t, err = s.Store.RequestCancel(ctx, u.ID, id, s.now()); err != nil {
		return domain.Result{}, err
	}
	msg := "the task is being canceled"
	if domain.Done(t.Status) {
		msg = "the task is canceled"
	}
	return domain.Result{Code: "Canceled", Message: msg}, nil
}

// Events is a page of the events of a task of u's.
func (s *Service) Events(ctx context.Context, u domain.User, id string, p domain.Page) ([]domain.Event, int, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return nil, 0, err
	}
	return s.Store.Events(ctx, t.ID, p)
}

// TaskFiles pages through the file records in state of a task of u's.
func (s *Service) TaskFiles(ctx context.Context, u domain.User, id, state string, marker int64, limit int) ([]domain.File, int64, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return nil, 0, err
	}
	return s.Store.Files(ctx, t.ID, state, marker, domain.Page{Limit: limit}.Normal().Limit)
}

// FailedTransfers pages through the files that failed of a task of u's:
// for a task with several destinations, each file that failed at one,
// naming it.
func (s *Service) FailedTransfers(ctx context.Context, u domain.User, id string, marker int64, limit int) ([]domain.FailedFile, int64, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return nil, 0, err
	}
	limit = domain.Page{Limit: limit}.Normal().Limit
	if len(t.Destinations) == 0 {
		files, next, err := s.Store.Files(ctx, t.ID, domain.FileFailed, marker, limit)
		out := make([]domain.FailedFile, len(files))
		for i, f := range files {
			out[i] = domain.FailedFile{Src: f.Src, Dst: f.Dst, Size: f.Size, Error: f.Error, Time: f.Time}
		}
		return out, next, err
	}
	files, next, err := s.Store.DestFiles(ctx, t.ID, -1, domain.FileFailed, marker, limit)
	out := make([]domain.FailedFile, len(files))
	for i, f := range files {
		out[i] = domain.FailedFile{Src: f.Src, Dst: f.Dst, Size: f.Size, Error: f.Error, Time: f.Time}
		if f.Dest < len(t.Destinations) {
			out[i].DestEndpoint = t.Destinations[f.Dest].Endpoint
		}
	}
	return out, next, err
}

// DeletedPaths pages through what a task of u's deleted at its
// destinations because the source does not have it
// (delete_destination_extra).
func (s *Service) DeletedPaths(ctx context.Context, u domain.User, id string, marker int64, limit int) ([]domain.DeletedPath, int64, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return nil, 0, err
	}
	ds, next, err := s.Store.Deletions(ctx, t.ID, marker, domain.Page{Limit: limit}.Normal().Limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]domain.DeletedPath, len(ds))
	for i, d := range ds {
		out[i] = domain.DeletedPath{Deletion: d}
		if d.Dest < len(t.Destinations) {
			out[i].DestEndpoint = t.Destinations[d.Dest].Endpoint
		}
	}
	return out, next, nil
}

// PartialPaths pages through the files a task of u's started and did
// not finish: what a task that is over left partial at the destination.
func (s *Service) PartialPaths(ctx context.Context, u domain.User, id string, marker int64, limit int) ([]domain.Partial, int64, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil {
		return nil, 0, err
	}
	return s.Store.Partials(ctx, t.ID, marker, limit)
}

// TaskCounts counts the store's tasks by status.
func (s *Service) TaskCounts(ctx context.Context) (map[string]int, error) {
	return s.Store.TaskCounts(ctx)
}
