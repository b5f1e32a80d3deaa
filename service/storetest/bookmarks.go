package storetest

import (
	"testing"

	"ferry/service/domain"
)

// testBookmarks: a user's bookmarks, by name, unique per user; another
// user's are missing; a bookmark goes with its endpoint and its user.
func testBookmarks(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	lab, pub := f.endpoint(alice, "lab", false, 0), f.endpoint(bob, "pub", true, 0)
	mark := func(u domain.User, name string, ep domain.Endpoint, path string) domain.Bookmark {
		t.Helper()
		b := domain.Bookmark{UserID: u.ID, Name: name, EndpointID: ep.ID, Path: path}
		f.ok(f.s.CreateBookmark(f.ctx, &b))
		if b.ID == "" || b.Created.IsZero() {
			t.Fatalf("CreateBookmark left ID or Created unset: %+v", b)
		}
		b.EndpointName = ep.Owner + "#" + ep.Name
		return b
	}
	runs := mark(alice, "runs", lab, "/proj/runs/")
	papers := mark(alice, "my papers", pub, "/papers/")
	bobs := mark(bob, "runs", pub, "/") // another user may use the same name
	got, err := f.s.Bookmarks(f.ctx, alice.ID)
	f.ok(err)
	equal(t, "Bookmarks", got, []domain.Bookmark{papers, runs})
	one, err := f.s.Bookmark(f.ctx, bob.ID, bobs.ID)
	f.ok(err)
	equal(t, "Bookmark", one, bobs)

	runs.Name, runs.Path = "old runs", "/proj/old/"
	f.ok(f.s.UpdateBookmark(f.ctx, runs))
	one, err = f.s.Bookmark(f.ctx, alice.ID, runs.ID)
	f.ok(err)
	equal(t, "Bookmark after UpdateBookmark", one, runs)

	runErrCases(t, []errCase{
		{"taken name", func() error {
			return f.s.CreateBookmark(f.ctx, &domain.Bookmark{UserID: alice.ID, Name: "my papers", EndpointID: lab.ID, Path: "/"})
		}, domain.EConflict},
		{"renamed to a taken name", func() error {
			b := runs
			b.Name = "my papers"
			return f.s.UpdateBookmark(f.ctx, b)
		}, domain.EConflict},
		{"another user's", func() error { _, err := f.s.Bookmark(f.ctx, bob.ID, runs.ID); return err }, domain.ENotFound},
		{"update another user's", func() error { b := runs; b.UserID = bob.ID; return f.s.UpdateBookmark(f.ctx, b) }, domain.ENotFound},
		{"delete another user's", func() error { return f.s.DeleteBookmark(f.ctx, bob.ID, runs.ID) }, domain.ENotFound},
		{"missing", func() error {
			_, err := f.s.Bookmark(f.ctx, alice.ID, "6a1c2b9e-0000-4000-8000-000000000000")
			return err
		}, domain.ENotFound},
	})

	f.ok(f.s.DeleteBookmark(f.ctx, alice.ID, runs.ID))
	f.ok(f.s.DeleteEndpoint(f.ctx, pub.ID)) // its bookmarks go with it
	for _, u := range []domain.User{alice, bob} {
		got, err := f.s.Bookmarks(f.ctx, u.ID)
		f.ok(err)
		if len(got) != 0 {
			t.Fatalf("bookmarks of %s after deletes: %+v", u.Name, got)
		}
	}
	mark(bob, "again", f.endpoint(alice, "other", true, 0), "/")
	f.ok(f.s.RemoveUser(f.ctx, bob.ID))
	if got, err := f.s.Bookmarks(f.ctx, bob.ID); err != nil || len(got) != 0 {
		t.Fatalf("bookmarks of a removed user: %+v, %v", got, err)
	}
}
