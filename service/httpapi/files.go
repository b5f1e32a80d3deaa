package httpapi

import (
	"fmt"
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

// serverState probes each of the endpoint's servers with the caller's
// login: up or not, its stripes, a ferry front end's movers.
func (s *Server) serverState(w http.ResponseWriter, r *http.Request, c *call) error {
	states, err := s.Files.ServerStates(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	doc := api.ServerStateList{DataType: "server_state_list", Data: make([]api.ServerState, len(states))}
	for i, st := range states {
		d := api.ServerState{DataType: "server_state", URI: st.URI, Up: st.Up, Error: st.Error, Stripes: st.Stripes,
			Movers: make([]api.MoverState, len(st.Movers))}
		for j, m := range st.Movers {
			d.Movers[j] = api.MoverState{DataType: "mover_state", Index: m.Index, Address: m.Addr, Up: m.Up, Reason: m.Reason}
		}
		doc.Data[i] = d
	}
	return reply(w, http.StatusOK, doc)
}

// ls answers a page of a directory's listing.
func (s *Server) ls(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := api.ParseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	filter := q
	filter.Page = api.Page{}
	lst, err := s.Files.List(r.Context(), c.user, r.PathValue("id"), domain.ListRequest{
		Path: q.Path, Keep: q.Keeps, Filter: filter.Values().Encode(), Unsorted: q.Unsorted,
		Page: domain.Page{Limit: q.Limit, Offset: q.Offset},
	})
	if err != nil {
		return err
	}
	page := lst.Page
	doc := api.FileList{DataType: "file_list", Endpoint: lst.Endpoint.ID, Path: lst.Path, PageInfo: pageInfo(page, len(lst.Files), lst.Total),
		HasNextPage: page.Offset+len(lst.Files) < lst.Total, Data: make([]api.File, len(lst.Files))}
	for i, f := range lst.Files {
		doc.Data[i] = api.File{DataType: "file", Name: f.Name, Type: f.Type, Size: f.Size, Permissions: f.Permissions, User: f.User, Group: f.Group, LastModified: f.Modified}
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Mkdir
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "mkdir"); err != nil {
		return err
	}
	p, err := s.Files.Mkdir(r.Context(), c.user, r.PathValue("id"), req.Path)
	if err != nil {
		return err
	}
	return result(w, r, "mkdir_result", "DirectoryCreated", "created directory "+p)
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Rename
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "rename"); err != nil {
		return err
	}
	from, to, err := s.Files.Rename(r.Context(), c.user, r.PathValue("id"), req.OldPath, req.NewPath, req.Overwrite)
	if err != nil {
		return err
	}
	return result(w, r, "rename_result", "FileRenamed", fmt.Sprintf("%s is renamed to %s", from, to))
}
