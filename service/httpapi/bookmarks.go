package httpapi

import (
	"net/http"

	"ferry/service/api"
	"ferry/service/domain"
)

// Bookmarks: the caller's names for paths on endpoints.

func (s *Server) bookmarkList(w http.ResponseWriter, r *http.Request, c *call) error {
	bs, err := s.Bookmarks.Bookmarks(r.Context(), c.user)
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
	b, err := s.Bookmarks.CreateBookmark(r.Context(), c.user, req.Name, req.Path, req.EndpointID)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, bookmarkDoc(b))
}

func (s *Server) bookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := s.Bookmarks.Bookmark(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
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
	b, err := s.Bookmarks.UpdateBookmark(r.Context(), c.user, r.PathValue("id"), req.Name, req.Path)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, bookmarkDoc(b))
}

func (s *Server) deleteBookmark(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.Bookmarks.DeleteBookmark(r.Context(), c.user, r.PathValue("id")); err != nil {
		return err
	}
	return result(w, r, "result", "Deleted", "the bookmark is deleted")
}

func bookmarkDoc(b domain.Bookmark) api.Bookmark {
	return api.Bookmark{DataType: "bookmark", ID: b.ID, Name: b.Name, EndpointID: b.EndpointID,
		EndpointDisplayName: b.EndpointName, Path: b.Path, Created: b.Created}
}
