package sqlstore

import (
	"context"

	"ferry/service/domain"
)

// bookmarkFrom selects bookmarks with their endpoint's owner#name.
const bookmarkFrom = `SELECT b.id, b.user_id, b.name, b.endpoint_id, u.name || '#' || e.name, b.path, b.created
	FROM bookmarks b JOIN endpoints e ON e.id = b.endpoint_id JOIN users u ON u.id = e.owner_id`

func scanBookmark(r scanner) (domain.Bookmark, error) {
	var b domain.Bookmark
	err := r.Scan(&b.ID, &b.UserID, &b.Name, &b.EndpointID, &b.EndpointName, &b.Path, timeCol{&b.Created})
	return b, err
}

// CreateBookmark stores b and sets its ID and (if zero) Created.
func (db *DB) CreateBookmark(ctx context.Context, b *domain.Bookmark) (err error) {
	defer wrap(&err, "create bookmark")
	nb := *b
	nb.ID, nb.Created = newID(), orNow(nb.Created)
	_, err = db.conn().exec(ctx, `INSERT INTO bookmarks (id, user_id, name, endpoint_id, path, created) VALUES (?, ?, ?, ?, ?, ?)`,
		nb.ID, nb.UserID, nb.Name, nb.EndpointID, nb.Path, us(nb.Created))
	if db.d.unique(err) {
		return bookmarkTaken(nb.Name)
	}
	if err != nil {
		return err
	}
	*b = nb
	return nil
}

func bookmarkTaken(name string) error {
	return domain.Errorf(domain.EConflict, "you have a bookmark named %q already", name)
}

func (db *DB) Bookmarks(ctx context.Context, userID int64) (_ []domain.Bookmark, err error) {
	defer wrap(&err, "bookmarks")
	return all(ctx, db.conn(), scanBookmark, bookmarkFrom+` WHERE b.user_id = ? ORDER BY b.name`, userID)
}

func (db *DB) Bookmark(ctx context.Context, userID int64, id string) (_ domain.Bookmark, err error) {
	defer wrap(&err, "bookmark")
	b, err := scanBookmark(db.conn().row(ctx, bookmarkFrom+` WHERE b.id = ? AND b.user_id = ?`, id, userID))
	return b, missing(err, "bookmark %s", id)
}

func (db *DB) UpdateBookmark(ctx context.Context, b domain.Bookmark) (err error) {
	defer wrap(&err, "update bookmark")
	n, err := db.conn().exec(ctx, `UPDATE bookmarks SET name = ?, path = ? WHERE id = ? AND user_id = ?`, b.Name, b.Path, b.ID, b.UserID)
	if db.d.unique(err) {
		return bookmarkTaken(b.Name)
	}
	return changed(n, err, "bookmark %s", b.ID)
}

func (db *DB) DeleteBookmark(ctx context.Context, userID int64, id string) (err error) {
	defer wrap(&err, "delete bookmark")
	n, err := db.conn().exec(ctx, `DELETE FROM bookmarks WHERE id = ? AND user_id = ?`, id, userID)
	return changed(n, err, "bookmark %s", id)
}
