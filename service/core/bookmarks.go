package core

import (
	"context"

	"ferry/service/domain"
)

var _ domain.BookmarkService = (*Service)(nil)

// Bookmarks lists u's bookmarks.
func (s *Service) Bookmarks(ctx context.Context, u domain.User) ([]domain.Bookmark, error) {
	return s.Store.Bookmarks(ctx, u.ID)
}

// CreateBookmark names path on an endpoint u may use.
func (s *Service) CreateBookmark(ctx context.Context, u domain.User, name, path, endpoint string) (domain.Bookmark, error) {
	b := domain.Bookmark{UserID: u.ID}
	if err := setBookmark(&b, &name, &path); err != nil {
		return b, err
	}
	ep, err := s.visibleEndpoint(ctx, u, "endpoint", endpoint)
	if err != nil {
		return b, err
	}
	b.EndpointID, b.EndpointName = ep.ID, ep.DisplayName()
	return b, s.Store.CreateBookmark(ctx, &b)
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

// Bookmark is one of u's bookmarks.
func (s *Service) Bookmark(ctx context.Context, u domain.User, id string) (domain.Bookmark, error) {
	b, err := s.Store.Bookmark(ctx, u.ID, id)
	return b, noBookmark(id, err)
}

// UpdateBookmark changes one of u's bookmarks.
func (s *Service) UpdateBookmark(ctx context.Context, u domain.User, id string, name, path *string) (domain.Bookmark, error) {
	b, err := s.Store.Bookmark(ctx, u.ID, id)
	if err != nil {
		return b, noBookmark(id, err)
	}
	if err := setBookmark(&b, name, path); err != nil {
		return b, err
	}
	return b, noBookmark(id, s.Store.UpdateBookmark(ctx, b))
}

// DeleteBookmark deletes one of u's bookmarks.
func (s *Service) DeleteBookmark(ctx context.Context, u domain.User, id string) error {
	return noBookmark(id, s.Store.DeleteBookmark(ctx, u.ID, id))
}

// noBookmark words the store's ENotFound for bookmark id; other errors
// stay.
func noBookmark(id string, err error) error {
	if domain.IsNotFound(err) {
		return domain.Errorf(domain.ENotFound, "no bookmark %q", id)
	}
	return err
}
