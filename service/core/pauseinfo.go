package core

import (
	"context"
	"slices"

	"ferry/service/domain"
)

// pauseEvents is how many of a task's last events pauseInfo looks through
// for the one that paused it.
const pauseEvents = 20

// PauseInfo says why a task of u's is paused and what resumes it.
func (s *Service) PauseInfo(ctx context.Context, u domain.User, id string) (domain.PauseInfo, error) {
	t, err := s.Store.Task(ctx, u.ID, id)
	if err != nil || t.Status != domain.StatusInactive {
		return domain.PauseInfo{Task: t}, err
	}
	pi := domain.PauseInfo{Task: t}
	if pi.Description, err = s.pausedBecause(ctx, t.ID); err != nil {
		return pi, err
	}
	pi.Endpoints, err = s.pausedBy(ctx, u, t)
	return pi, err
}

// pausedBecause is the description of the event that paused task id: the
// last INACTIVE one.
func (s *Service) pausedBecause(ctx context.Context, id string) (string, error) {
	_, total, err := s.Store.Events(ctx, id, domain.Page{Limit: 1})
	if err != nil {
		return "", err
	}
	evs, _, err := s.Store.Events(ctx, id, domain.Page{Limit: pauseEvents, Offset: max(0, total-pauseEvents)})
	if err != nil {
		return "", err
	}
	for _, e := range slices.Backward(evs) {
		if e.Code == domain.EventInactive {
			return e.Description, nil
		}
	}
	return "", nil
}

// pausedBy lists the endpoints of t, a paused task, that hold it, with
// what resumes it: for a full destination, space there; for an agent
// away, the agent; else the activations that u lacks (of the
// task's endpoints and of the head nodes they are reached through) — or,
// when the task was paused though it has them all (an endpoint refused
// the credential), every endpoint that takes one.
func (s *Service) pausedBy(ctx context.Context, u domain.User, t domain.Task) ([]domain.PausedEndpoint, error) {
	var ids []string // each once, in order
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	add(t.SrcEndpoint)
	add(t.DstEndpoint)
	for _, d := range t.Destinations {
		add(d.Endpoint)
	}
	var held, activatable []domain.PausedEndpoint
	for i := 0; i < len(ids); i++ {
		ep, err := s.Store.Endpoint(ctx, ids[i])
		if domain.IsNotFound(err) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		add(ep.Via)
		pe := domain.PausedEndpoint{ID: ep.ID, DisplayName: ep.DisplayName()}
		switch {
		case t.NiceStatus == domain.NiceNoSpace:
			if destination(t, ep.ID) {
				pe.Resume = domain.ResumeFreeSpace
			}
		case t.NiceStatus == domain.NiceEndpointOffline:
			if ep.Auth == domain.AuthConnect {
				pe.Resume = domain.ResumeAgent
			}
		case ep.NeedsActivation():
			pe.Resume = domain.ResumeActivate
			activatable = append(activatable, pe)
			if activated, _, err := s.activation(ctx, u, ep); err != nil || activated {
				pe.Resume = "" // activated: not what holds the task, unless none holds it
				if err != nil {
					return nil, err
				}
			}
		}
		if pe.Resume != "" {
			held = append(held, pe)
		}
	}
	if len(held) == 0 {
		return activatable, nil
	}
	return held, nil
}

// destination reports whether endpoint id is one of t's destinations.
func destination(t domain.Task, id string) bool {
	return t.DstEndpoint == id || slices.ContainsFunc(t.Destinations, func(d domain.Destination) bool { return d.Endpoint == id })
}
