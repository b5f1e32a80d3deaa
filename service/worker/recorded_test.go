package worker

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// TestRecordedWindow asks a recorded that holds at most 3 names about
// the records of a task in a SQLite store: each directory is read when
// first asked about and held, the least recently asked dropped when
// another would pass the bound (and read again when asked about again),
// a record noted during the run counts in a held directory, and one in a
// directory not held is the store's to know (the progress keeps those
// not stored yet).
func TestRecordedWindow(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var u domain.User
	if err := store.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	task := domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: "s", DstEndpoint: "d"}
	if err := store.CreateTask(ctx, &task); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, "w", time.Now(), time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	var b domain.Batch
	for _, src := range []string{"/a/1", "/a/2", "/a/3", "/b/1", "/b/2", "top"} {
		b.Files = append(b.Files, domain.File{Src: src, Dst: "/to" + src, State: domain.FileFailed})
	}
	if err := store.Progress(ctx, task.ID, "w", b); err != nil {
		t.Fatal(err)
	}
	c := newRecorded(store, task.ID)
	c.max = 3
	held := func() []string {
		var dirs []string
		for e := c.lru.Front(); e != nil; e = e.Next() {
			dirs = append(dirs, e.Value.(*names).dir)
		}
		return dirs
	}
	for _, step := range []struct {
		add   string // noted as recorded before the question
		src   string
		other bool // asked about src going elsewhere than where it was recorded going
		want  bool
		held  []string // directories held after, most recently asked first
	}{
		{src: "/a/1", want: true, held: []string{"/a/"}},
		{src: "/a/4", want: false, held: []string{"/a/"}},
		{src: "/a/1", other: true, want: false, held: []string{"/a/"}},
		{src: "/b/2", want: true, held: []string{"/b/"}},
		{add: "/b/3", src: "/b/3", want: true, held: []string{"/b/"}},
		{src: "/a/3", want: true, held: []string{"/a/"}},
		{add: "/c/1", src: "/c/1", want: false, held: []string{"/c/", "/a/"}},
		{src: "top", want: true, held: []string{"", "/c/"}},
		{src: "/b/1", want: true, held: []string{"/b/", "", "/c/"}},
		{src: "/a/2", want: true, held: []string{"/a/"}},
	} {
		if step.add != "" {
			c.add(step.add, "/to"+step.add)
		}
		dst := "/to" + step.src
		if step.other {
			dst = "/elsewhere" + step.src
		}
		got, err := c.has(ctx, step.src, dst)
		if err != nil || got != step.want || !slices.Equal(held(), step.held) {
			t.Fatalf("after adding %q, has(%q) = %v, %v holding %q; want %v holding %q", step.add, step.src, got, err, held(), step.want, step.held)
		}
	}
	c.clear()
	if len(held()) != 0 || c.held != 0 {
		t.Fatalf("clear left %q (%d hashes)", held(), c.held)
	}
}

// TestRecordedAddsCompact notes 100,000 records made during a run in a
// held directory, as a run of a large directory does: each is known
// after, others are not, and the hashes noted are kept sorted as the read
// ones are, but a few in a set (8 bytes a record, not a map entry's
// several times that).
func TestRecordedAddsCompact(t *testing.T) {
	const n = 100_000
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := newRecorded(store, "task")
	if got, err := c.has(ctx, "/big/none", "/to"); got || err != nil {
		t.Fatalf("has in an empty store: %v, %v", got, err)
	}
	name := func(i int) string { return "/big/f" + strconv.Itoa(i) }
	for i := range n {
		c.add(name(i), "/to")
	}
	c.add(name(7), "/to") // again
	e := c.dirs["/big/"]
	nm := e.Value.(*names)
	if s, a := len(nm.sorted), len(nm.added); s+a != n || c.held != n || a > 64+s/8 {
		t.Errorf("%d records noted: %d hashes sorted, %d in a set, %d counted held; want %d in all, at most 64 + 1/8 of the sorted in the set",
			n, s, a, c.held, n)
	}
	for i := range n {
		if got, err := c.has(ctx, name(i), "/to"); !got || err != nil {
			t.Fatalf("has(%s) = %v, %v after it was noted", name(i), got, err)
		}
	}
	if got, _ := c.has(ctx, name(n), "/to"); got {
		t.Errorf("has(%s) = true; it was never noted", name(n))
	}
}
