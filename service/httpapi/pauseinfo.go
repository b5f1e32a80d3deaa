package httpapi

import (
	"net/http"
	"slices"

	"ferry/service/api"
	"ferry/service/domain"
)

// pauseEvents is how many of a task's last events pauseInfo looks through
// for the one that paused it.
const pauseEvents = 20

func (s *Server) pauseInfo(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := s.Store.Task(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	doc := api.PauseInfo{DataType: "pause_info", TaskID: t.ID, IsPaused: t.Status == domain.StatusInactive}
	if !doc.IsPaused {
		return reply(w, http.StatusOK, doc)
	}
	doc.NiceStatus = t.NiceStatus
	if doc.Description, err = s.pausedBecause(r, t.ID); err != nil {
		return err
	}
	if doc.Endpoints, err = s.pausedBy(r, c, t); err != nil {
		return err
	}
	return reply(w, http.StatusOK, doc)
}

// pausedBecause is the description of the event that paused task id: the
// last INACTIVE one.
func (s *Server) pausedBecause(r *http.Request, id string) (string, error) {
	_, total, err := s.Store.Events(r.Context(), id, domain.Page{Limit: 1})
	if err != nil {
		return "", err
	}
	evs, _, err := s.Store.Events(r.Context(), id, domain.Page{Limit: pauseEvents, Offset: max(0, total-pauseEvents)})
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
// away, the agent; else the activations that the caller lacks (of the
// task's endpoints and of the head nodes they are reached through) — or,
// when the task was paused though it has them all (an endpoint refused
// the credential), every endpoint that takes one.
func (s *Server) pausedBy(r *http.Request, c *call, t domain.Task) ([]api.PausedEndpoint, error) {
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
	var held, activatable []api.PausedEndpoint
	for i := 0; i < len(ids); i++ {
		ep, err := s.Store.Endpoint(r.Context(), ids[i])
		if domain.IsNotFound(err) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		add(ep.Via)
		pe := api.PausedEndpoint{DataType: "paused_endpoint", EndpointID: ep.ID, DisplayName: ep.DisplayName()}
		switch {
		case t.NiceStatus == domain.NiceNoSpace:
			if destination(t, ep.ID) {
				pe.Resume = api.ResumeFreeSpace
			}
		case t.NiceStatus == domain.NiceEndpointOffline:
			if ep.Auth == domain.AuthConnect {
				pe.Resume = api.ResumeAgent
			}
		case ep.NeedsActivation():
			pe.Resume = api.ResumeActivate
			activatable = append(activatable, pe)
			if activated, _, err := s.activation(r, c, ep); err != nil || activated {
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
