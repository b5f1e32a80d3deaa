package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"ferry/service/api"
)

// TestBookmarks: a user's bookmarks of endpoints they may see, names
// unique per user, invisible to others.
func TestBookmarks(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	bob, _ := e.user("bob")
	addEndpoint(t, alice, "lab", "anonymous", false)
	addEndpoint(t, bob, "pub", "anonymous", true)
	addEndpoint(t, bob, "private", "anonymous", false)
	ctx := t.Context()

	runs, err := alice.CreateBookmark(ctx, "runs", "lab", "/proj/../proj/runs/")
	if err != nil || runs.ID == "" || runs.DataType != "bookmark" || runs.Path != "/proj/runs/" || runs.EndpointDisplayName != "alice#lab" {
		t.Fatalf("CreateBookmark: %+v, %v", runs, err)
	}
	pub, err := alice.CreateBookmark(ctx, "bob's data", "bob#pub", "/data")
	if err != nil || pub.EndpointDisplayName != "bob#pub" {
		t.Fatalf("CreateBookmark of a public endpoint: %+v, %v", pub, err)
	}
	for _, c := range []struct {
		name   string
		try    func() error
		status int
		code   string
		msg    string
	}{
		{"taken name", func() error { _, err := alice.CreateBookmark(ctx, "runs", "lab", "/"); return err }, http.StatusConflict, "Conflict", `you have a bookmark named "runs" already`},
		{"another's private endpoint", func() error { _, err := alice.CreateBookmark(ctx, "x", "bob#private", "/"); return err }, http.StatusNotFound, "NotFound", `no endpoint "bob#private"`},
		{"no name", func() error { _, err := alice.CreateBookmark(ctx, " ", "lab", "/"); return err }, http.StatusBadRequest, "BadRequest", "a bookmark needs a name"},
		{"no path", func() error { _, err := alice.CreateBookmark(ctx, "y", "lab", ""); return err }, http.StatusBadRequest, "BadRequest", "a bookmark needs a path"},
		{"no endpoint", func() error { _, err := alice.CreateBookmark(ctx, "y", "", "/"); return err }, http.StatusBadRequest, "BadRequest", "no endpoint given"},
		{"another user's", func() error { _, err := bob.Bookmark(ctx, runs.ID); return err }, http.StatusNotFound, "NotFound", `no bookmark "` + runs.ID + `"`},
		{"rename another user's", func() error {
			n := "mine"
			_, err := bob.UpdateBookmark(ctx, runs.ID, api.BookmarkUpdate{Name: &n})
			return err
		}, http.StatusNotFound, "NotFound", "no bookmark"},
		{"rename to a taken name", func() error {
			n := "runs"
			_, err := alice.UpdateBookmark(ctx, pub.ID, api.BookmarkUpdate{Name: &n})
			return err
		}, http.StatusConflict, "Conflict", "already"},
		{"delete another user's", func() error { _, err := bob.DeleteBookmark(ctx, runs.ID); return err }, http.StatusNotFound, "NotFound", "no bookmark"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if ae := wantAPIError(t, c.try(), c.status, c.code); !strings.Contains(ae.Message, c.msg) {
				t.Fatalf("message %q, want %q", ae.Message, c.msg)
			}
		})
	}
	if l, err := bob.Bookmarks(ctx); err != nil || len(l.Data) != 0 || l.DataType != "bookmark_list" {
		t.Fatalf("bob's bookmarks: %+v, %v", l, err)
	}
	n, p := "old runs", "/proj/old"
	if b, err := alice.UpdateBookmark(ctx, runs.ID, api.BookmarkUpdate{Name: &n, Path: &p}); err != nil || b.Name != n || b.Path != p || b.EndpointDisplayName != "alice#lab" {
		t.Fatalf("UpdateBookmark: %+v, %v", b, err)
	}
	l, err := alice.Bookmarks(ctx)
	if err != nil || len(l.Data) != 2 || l.Data[0].Name != "bob's data" || l.Data[1].Name != "old runs" {
		t.Fatalf("alice's bookmarks: %+v, %v", l, err)
	}
	if r, err := alice.DeleteBookmark(ctx, runs.ID); err != nil || r.Code != "Deleted" {
		t.Fatalf("DeleteBookmark: %+v, %v", r, err)
	}
	wantAPIError(t, func() error { _, err := alice.Bookmark(ctx, runs.ID); return err }(), http.StatusNotFound, "NotFound")
}
