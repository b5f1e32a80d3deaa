package core

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"ferry/checksum"
	"ferry/internal/synclevel"
	"ferry/service/domain"
)

var _ domain.TaskService = (*Service)(nil)

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

// newTask checks what transfers and deletes share and starts their task.
func (s *Service) newTask(typ string, sub domain.Submission, items int) (domain.Task, error) {
	t := domain.Task{Type: typ, SubmissionID: sub.SubmissionID, Label: sub.Label, Deadline: sub.Deadline, RequestTime: s.now()}
	if sub.Deadline.IsZero() && s.DefaultDeadline > 0 {
		t.Deadline = t.RequestTime.Add(s.DefaultDeadline)
	}
	if err := checkText("submission_id", sub.SubmissionID, 128); err != nil {
		return t, err
	}
	if t.SubmissionID == "" {
		t.SubmissionID = rand.Text()
	}
	if err := checkText("label", sub.Label, 128); err != nil {
		return t, err
	}
	if !sub.Deadline.IsZero() {
		if err := checkDeadline(sub.Deadline, t.RequestTime); err != nil {
			return t, err
		}
	}
	if items == 0 {
		return t, domain.Errorf(domain.EInvalid, "no items: a task moves at least one")
	}
	orTrue := func(b *bool) bool { return b == nil || *b }
	t.Options.NotifyOnSucceeded = orTrue(sub.NotifyOnSucceeded)
	t.Options.NotifyOnFailed = orTrue(sub.NotifyOnFailed)
	t.Options.NotifyOnInactive = orTrue(sub.NotifyOnInactive)
	return t, nil
}

// submit stores a new task of u's; created is false for a task an
// earlier submission with the same ID made.
func (s *Service) submit(ctx context.Context, u domain.User, t domain.Task) (domain.Task, bool, error) {
	t.UserID = u.ID
	err := s.Store.CreateTask(ctx, &t)
	switch {
	case domain.ErrorCode(err) == domain.EDuplicate:
		return t, false, nil
	case err != nil:
		return t, false, err
	}
	s.queued()
	return t, true, nil
}

// SubmitTransfer checks a transfer of u's and stores its task.
func (s *Service) SubmitTransfer(ctx context.Context, u domain.User, req domain.TransferRequest) (domain.Task, bool, error) {
	t, err := s.newTask(domain.TypeTransfer, req.Submission, len(req.Items))
	if err != nil {
		return t, false, err
	}
	o := &t.Options
	if o.SyncLevel, err = synclevel.FromAPI(req.SyncLevel); err != nil {
		return t, false, domain.Errorf(domain.EInvalid, "%v", err)
	}
	if req.ChecksumAlgorithm != "" {
		if o.ChecksumAlgorithm, err = checksum.Canonical(req.ChecksumAlgorithm); err != nil {
			return t, false, domain.Errorf(domain.EInvalid, "checksum algorithm %q: want one of %s", req.ChecksumAlgorithm, strings.Join(checksum.Names(), ", "))
		}
	}
	o.VerifyChecksum = req.VerifyChecksum
	o.EncryptData = req.EncryptData
	o.PreserveTimestamp = req.PreserveTimestamp
	o.Compress = req.Compress
	if req.Tar != "" {
		o.Tar = strings.ToLower(req.Tar)
		if !slices.Contains(domain.TarModes, o.Tar) {
			return t, false, domain.Errorf(domain.EInvalid, "tar %q: want one of %s", req.Tar, strings.Join(domain.TarModes, ", "))
		}
	}
	o.DeleteDestinationExtra = req.DeleteDestinationExtra
	o.SkipSourceErrors, o.FailOnQuotaErrors = req.SkipSourceErrors, req.FailOnQuotaErrors
	for i, f := range req.FilterRules {
		if err := checkFilterRule(i, f); err != nil {
			return t, false, err
		}
		o.FilterRules = append(o.FilterRules, f)
	}
	for i, it := range req.Items {
		src, err := itemPath("source path", i, it.Src)
		if err != nil {
			return t, false, err
		}
		dst, err := itemPath("destination path", i, it.Dst)
		if err != nil {
			return t, false, err
		}
		t.Items = append(t.Items, domain.Item{Src: src, Dst: dst, Recursive: it.Recursive})
	}
	src, err := s.visibleEndpoint(ctx, u, "source endpoint", req.Source)
	if err != nil {
		return t, false, err
	}
	if src.Via != "" {
		return t, false, src.ViaError("be a transfer's source")
	}
	dsts, err := s.destinations(ctx, u, req, t.Items)
	if err != nil {
		return t, false, err
	}
	if o.SkipSourceErrors && (len(dsts) > 1 || dsts[0].ep.Via != "") {
		return t, false, domain.Errorf(domain.EInvalid, "a transfer to several destinations, or to one behind a head node, "+
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
		if err := s.checkTransfer(ctx, u, src, d.ep, d.items, t.Options); err != nil {
			return t, false, err
		}
	}
	return s.submit(ctx, u, t)
}

// dest is one destination of a submitted transfer: its endpoint, its own
// paths (nil: the items'), and the items as they go there.
type dest struct {
	ep    domain.Endpoint
	paths []string
	items []domain.Item
}

// destinations reads a submission's destination or its destinations,
// and refuses two destinations that are one place (the same storage and
// paths of which one is or holds the other).
func (s *Service) destinations(ctx context.Context, u domain.User, req domain.TransferRequest, items []domain.Item) ([]dest, error) {
	if len(req.Destinations) == 0 {
		ep, err := s.visibleEndpoint(ctx, u, "destination endpoint", req.Destination)
		return []dest{{ep: ep, items: items}}, err
	}
	if req.Destination != "" {
		return nil, domain.Errorf(domain.EInvalid, "destination_endpoint and destinations: give one or the other")
	}
	if len(req.Destinations) > domain.MaxDestinations {
		return nil, domain.Errorf(domain.EInvalid, "destinations: %d of them, at most %d", len(req.Destinations), domain.MaxDestinations)
	}
	var out []dest
	for i, d := range req.Destinations {
		ep, err := s.visibleEndpoint(ctx, u, fmt.Sprintf("endpoint for destination %d", i+1), d.Endpoint)
		if err != nil {
			return nil, err
		}
		nd := dest{ep: ep, items: items}
		if d.Paths != nil {
			if len(d.Paths) != len(items) {
				return nil, domain.Errorf(domain.EInvalid, "destination %d has %d paths for %d items: want one per item",
					i+1, len(d.Paths), len(items))
			}
			for j, p := range d.Paths {
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
func (s *Service) checkTransfer(ctx context.Context, u domain.User, src, dst domain.Endpoint, items []domain.Item, o domain.Options) error {
	if sameStorage(src, dst) {
		for _, it := range items {
			if err := s.Ops.Overlap(dst, it, o); err != nil {
				return err
			}
		}
	}
	within := s.checkWithin()
	if within < 0 || dst.Via != "" {
		return nil // a destination behind a relay cannot be asked: the head node's copy checks it
	}
	var logins [2]domain.Login
	for i, ep := range []domain.Endpoint{src, dst} {
		l, err := s.endpointLogin(ctx, u, ep)
		if err != nil {
			return nil // not activated: the task waits INACTIVE
		}
		logins[i] = l
	}
	cctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return s.refusal(s.Ops.CheckTransfer(cctx, src, dst, logins[0], logins[1], items[:min(len(items), checkItems)], o))
}

// checkWithin is CheckWithin, 2 s for 0.
func (s *Service) checkWithin() time.Duration { return cmp.Or(s.CheckWithin, 2*time.Second) }

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

func checkFilterRule(i int, f domain.FilterRule) error {
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

// SubmitDelete checks a delete of u's and stores its task.
func (s *Service) SubmitDelete(ctx context.Context, u domain.User, req domain.DeleteRequest) (domain.Task, bool, error) {
	t, err := s.newTask(domain.TypeDelete, req.Submission, len(req.Paths))
	if err != nil {
		return t, false, err
	}
	t.Options.IgnoreMissing = req.IgnoreMissing
	for i, p := range req.Paths {
		p, err := itemPath("path", i, p)
		if err != nil {
			return t, false, err
		}
		if p == "/" {
			return t, false, domain.Errorf(domain.EInvalid, "the root of an endpoint cannot be deleted")
		}
		t.Items = append(t.Items, domain.Item{Src: p, Recursive: req.Recursive})
	}
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", req.Endpoint)
	if err != nil {
		return t, false, err
	}
	if ep.Via != "" {
		return t, false, ep.ViaError("delete")
	}
	if err := s.checkDelete(ctx, u, ep, t.Items, req.IgnoreMissing); err != nil {
		return t, false, err
	}
	t.SrcEndpoint = ep.ID
	return s.submit(ctx, u, t)
}

// checkDelete refuses a delete of a missing path (unless ignoreMissing)
// or of a directory without recursion, as checkTransfer refuses a
// transfer that cannot work: the endpoint is asked while it answers
// within CheckWithin; one not activated, or slow, leaves the question to
// the task.
func (s *Service) checkDelete(ctx context.Context, u domain.User, ep domain.Endpoint, items []domain.Item, ignoreMissing bool) error {
	within := s.checkWithin()
	if within < 0 {
		return nil
	}
	l, err := s.endpointLogin(ctx, u, ep)
	if err != nil {
		return nil // not activated: the task waits INACTIVE
	}
	cctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return s.refusal(s.Ops.CheckDelete(cctx, ep, l, items[:min(len(items), checkItems)], ignoreMissing))
}

// refusal is what a submission check's err means: EInvalid or ENotFound
// refuse the submission; anything else (a server that did not answer in
// time) is logged and left to the worker.
func (s *Service) refusal(err error) error {
	switch domain.ErrorCode(err) {
	case domain.EInvalid, domain.ENotFound:
		return err
	}
	if err != nil {
		s.logger().Info("submission check left to the worker", "err", err)
	}
	return nil
}

// ResumeTask runs an INACTIVE task of u's again, once u has mended what
// it waited for (space at a full destination). A transfer that is over
// cannot resume: the conflict names the command that finishes its job.
func (s *Service) ResumeTask(ctx context.Context, u domain.User, id string) error {
	if err := s.Store.ResumeTask(ctx, u.ID, id, s.now()); err != nil {
		if domain.ErrorCode(err) != domain.EConflict {
			return err
		}
		return s.finishAdvice(ctx, u, id, err)
	}
	s.queued()
	return nil
}

// finishAdvice is the conflict of resuming a task that is not INACTIVE,
// with the command that finishes its job when it is over.
func (s *Service) finishAdvice(ctx context.Context, u domain.User, id string, conflict error) error {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil || !domain.Done(t.Status) {
		return cmp.Or(err, conflict)
	}
	if t.Items, err = s.Store.TaskItems(ctx, t.ID); err != nil {
		return err
	}
	advice := domain.FinishAdvice(t)
	if advice == "" {
		return conflict
	}
	return domain.Errorf(domain.EConflict, "task %s is %s: there is nothing to resume; %s", t.ID, t.Status, advice)
}

// checkDeadline refuses a task's deadline that is not after now.
func checkDeadline(deadline, now time.Time) error {
	if !deadline.After(now) {
		return domain.Errorf(domain.EInvalid, "deadline %s is in the past", deadline.Format(time.RFC3339))
	}
	return nil
}
