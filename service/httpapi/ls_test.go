package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// TestLsListsOnce: paging through a directory lists it on the endpoint
// once, at its first page; the pages cover every entry once, in name
// order, with the total; a first page lists it anew, and so does a later
// page once the listing has expired.
func TestLsListsOnce(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "data", "anonymous", false)
	const many = 2500
	var dir, want []string
	for i := range many {
		name := fmt.Sprintf("f%05d", (i*7919)%many) // not in name order
		dir = append(dir, name)
		want = append(want, name)
	}
	slices.Sort(want)
	e.ops.set(func(f *fakeOps) {
		for _, n := range dir {
			f.dirs["/big"] = append(f.dirs["/big"], domain.FileInfo{Name: n, Type: "file", Size: int64(len(n))})
		}
	})
	page := func(offset int) api.FileList {
		t.Helper()
		l, err := alice.Ls(t.Context(), "data", api.ListQuery{Path: "/big", ShowHidden: true, Page: api.Page{Limit: 1000, Offset: offset}})
		if err != nil {
			t.Fatal(err)
		}
		if l.Total != many || l.HasNextPage != (offset+1000 < many) {
			t.Fatalf("page at %d: total %d, next page %v; want %d, %v", offset, l.Total, l.HasNextPage, many, offset+1000 < many)
		}
		return l
	}
	var got []string
	for offset := 0; offset < many; offset += 1000 {
		for _, f := range page(offset).Data {
			got = append(got, f.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages hold %d names; not each name once in order", len(got))
	}
	if n := e.ops.listed("/big"); n != 1 {
		t.Errorf("three pages listed the directory %d times, want once", n)
	}
	page(0)
	if n := e.ops.listed("/big"); n != 2 {
		t.Errorf("a first page again: listed %d times in all, want 2", n)
	}
	page(1000)
	e.clock.Add(time.Hour)
	page(2000)
	if n := e.ops.listed("/big"); n != 3 {
		t.Errorf("a page of an expired listing: listed %d times in all, want 3", n)
	}
	// A listing lives five minutes from its last page, not its first:
	// pages of a huge directory on a slow link come for longer.
	page(0)
	for _, offset := range []int{1000, 2000, 1000} {
		e.clock.Add(4 * time.Minute) // less than the five minutes a listing lives
		page(offset)
	}
	if n := e.ops.listed("/big"); n != 4 {
		t.Errorf("pages within listingTTL of each other: listed %d times in all, want 4", n)
	}
}

// unsortedDir puts in /big of e's endpoints the directory of many
// entries, not in name order, that the unsorted ls tests list, and
// returns their names in the order the endpoint lists them.
func unsortedDir(e *env, many int) []string {
	var names []string
	e.ops.set(func(f *fakeOps) {
		for i := range many {
			n := fmt.Sprintf("f%05d", (i*7919)%many)
			names = append(names, n)
			f.dirs["/big"] = append(f.dirs["/big"], domain.FileInfo{Name: n, Type: "file"})
		}
	})
	return names
}

// names are the names of l's entries.
func names(l api.FileList) []string {
	var out []string
	for _, f := range l.Data {
		out = append(out, f.Name)
	}
	return out
}

// TestLsUnsorted: with orderby=none a page comes as soon as its entries
// (and one more, to know there is a next page) are listed, while the
// endpoint still lists the rest, even when it has stopped sending:
// pages hold the entries in the order the endpoint lists them, say that
// there is a next page, with a total of those listed so far; pages asked
// for at once, while the listing runs, read that one listing and
// together hold every entry once, the last with the whole total.
func TestLsUnsorted(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "data", "anonymous", false)
	const many, held = 2500, 1500
	dir := unsortedDir(e, many)
	hold, holding := make(chan struct{}), make(chan struct{})
	e.ops.set(func(f *fakeOps) { f.hold, f.holdAt, f.holding = hold, held, holding })
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	ls := func(ctx context.Context, offset, limit int) (api.FileList, error) {
		return alice.Ls(ctx, "data", api.ListQuery{Path: "/big", ShowHidden: true, Unsorted: true, Page: api.Page{Limit: limit, Offset: offset}})
	}

	// Not a timing: a guard, so that a page that waits for the whole
	// listing fails the test rather than hangs it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, p := range []struct{ offset, limit int }{{0, 1000}, {1000, 400}} {
		l, err := ls(ctx, p.offset, p.limit)
		if err != nil {
			t.Fatalf("page at %d, while the endpoint holds the listing at %d entries: %v", p.offset, held, err)
		}
		if !slices.Equal(names(l), dir[p.offset:p.offset+p.limit]) || !l.HasNextPage || l.Total <= p.offset+p.limit || l.Total > held {
			t.Fatalf("page at %d: %d entries, next page %v, total %d; want the %d listed there, a next page, a total in %d..%d",
				p.offset, len(l.Data), l.HasNextPage, l.Total, p.limit, p.offset+p.limit+1, held)
		}
		if p.offset == 0 {
			select { // the next page is asked for once the listing is held
			case <-holding:
			case <-ctx.Done():
				t.Fatal("the listing never reached the hold")
			}
		}
	}

	pages := make([]api.FileList, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range pages {
		wg.Go(func() { pages[i], errs[i] = ls(t.Context(), 1400+1000*i, 1000) })
	}
	release()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(pages[0]), dir[1400:2400]) || !pages[0].HasNextPage || pages[0].Total <= 2400 {
		t.Errorf("third page: %d entries, next page %v, total %d; want the next 1000 listed and a next page",
			len(pages[0].Data), pages[0].HasNextPage, pages[0].Total)
	}
	if !slices.Equal(names(pages[1]), dir[2400:]) || pages[1].HasNextPage || pages[1].Total != many {
		t.Errorf("last page: %d entries, next page %v, total %d; want the last 100 listed, no next page, total %d",
			len(pages[1].Data), pages[1].HasNextPage, pages[1].Total, many)
	}
	if n := e.ops.listed("/big"); n != 1 {
		t.Errorf("four pages listed the directory %d times, want once", n)
	}
}

// TestLsUnsortedBroken: a listing that fails after some entries serves
// the pages it listed, and the page that reaches the failure, and every
// later one, has the error rather than a short last page.
func TestLsUnsortedBroken(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "data", "anonymous", false)
	const many = 2500
	dir := unsortedDir(e, many)
	e.ops.set(func(f *fakeOps) { f.broken = domain.Errorf(domain.EUnavailable, "426 data connection closed") })
	for _, tc := range []struct {
		offset int
		want   []string // nil: the error
	}{
		{0, dir[:1000]},
		{1000, dir[1000:2000]},
		{2000, nil},
		{1500, nil},
		{2400, nil},
		{500, dir[500:1500]},
	} {
		l, err := alice.Ls(t.Context(), "data", api.ListQuery{Path: "/big", ShowHidden: true, Unsorted: true, Page: api.Page{Limit: 1000, Offset: tc.offset}})
		var ae *api.Error
		switch {
		case tc.want == nil && (!errors.As(err, &ae) || ae.Code != domain.EUnavailable):
			t.Errorf("page at %d: %d entries, %v; want the listing's error", tc.offset, len(l.Data), err)
		case tc.want != nil && (err != nil || !slices.Equal(names(l), tc.want) || !l.HasNextPage):
			t.Errorf("page at %d: %d entries, next page %v, %v; want %d entries listed before the failure and a next page",
				tc.offset, len(l.Data), l.HasNextPage, err, len(tc.want))
		}
	}
	if n := e.ops.listed("/big"); n != 1 {
		t.Errorf("six pages listed the directory %d times, want once", n)
	}
}
