package httpapi

import (
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

// Bookmarks: the caller's names for paths on endpoints.

func (s *Server) bookmarkList(w http.ResponseWriter, r *http.Request, c *call) error {
	bs, err := s.Store.Bookmarks(r.Context(), c.user.ID)
	if err != nil {
		return err
	}
	doc := api.BookmarkList{DataType: "bookmark_list", Data: make([]api.Bookmark, len(bs))}
	for i, b := range bs {
		doc.Data[i] = bookmarkDoc(b)
	}
	return reply(w, http.StatusOK, doc)
}

func (s *Server) createBookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Bookmark
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "bookmark"); err != nil {
		return err
	}
	b := domain.Bookmark{UserID: c.user.ID}
	if err := setBookmark(&b, &req.Name, &req.Path); err != nil {
		return err
	}
	ep, err := s.Endpoints.FindEndpoint(r.Context(), c.user, req.EndpointID)
	if err != nil {
		return err
	}
	b.EndpointID, b.EndpointName = ep.ID, ep.DisplayName()
	if err := s.Store.CreateBookmark(r.Context(), &b); err != nil {
		return err
	}
	return reply(w, http.StatusCreated, bookmarkDoc(b))
}

// setBookmark changes b's name and path to those given (nil: kept),
// refusing a bad name or path.
func setBookmark(b *domain.Bookmark, name, path *string) error {
	if name != nil {
		if err := domain.ValidBookmarkName(*name); err != nil {
			return err
		}
		b.Name = *name
	}
	if path != nil {
		if *path == "" {
			return domain.Errorf(domain.EInvalid, "a bookmark needs a path")
		}
		p, err := domain.CleanPath(*path, "")
		if err != nil {
			return err
		}
		b.Path = p
	}
	return nil
}

func (s *Server) bookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := s.Store.Bookmark(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return noBookmark(r, err)
	}
	return reply(w, http.StatusOK, bookmarkDoc(b))
}

func (s *Server) updateBookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.BookmarkUpdate
	if err := decode(r, &req, false); err != nil {
		return err
	}
	if err := dataType(req.DataType, "bookmark"); err != nil {
		return err
	}
	b, err := s.Store.Bookmark(r.Context(), c.user.ID, r.PathValue("id"))
	if err != nil {
		return noBookmark(r, err)
	}
	if err := setBookmark(&b, req.Name, req.Path); err != nil {
		return err
	}
	if err := s.Store.UpdateBookmark(r.Context(), b); err != nil {
		return noBookmark(r, err)
	}
	return reply(w, http.StatusOK, bookmarkDoc(b))
}

func (s *Server) deleteBookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.Store.DeleteBookmark(r.Context(), c.user.ID, r.PathValue("id")); err != nil {
		return noBookmark(r, err)
	}
	return result(w, r, "result", "Deleted", "the bookmark is deleted")
}

// noBookmark words the store's ENotFound for the bookmark the request
// names; other errors stay.
func noBookmark(r *http.Request, err error) error {
	if domain.IsNotFound(err) {
		return domain.Errorf(domain.ENotFound, "no bookmark %q", r.PathValue("id"))
	}
	return err
}

func bookmarkDoc(b domain.Bookmark) api.Bookmark {
	return api.Bookmark{DataType: "bookmark", ID: b.ID, Name: b.Name, EndpointID: b.EndpointID,
		EndpointDisplayName: b.EndpointName, Path: b.Path, Created: b.Created}
}
