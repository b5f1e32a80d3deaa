package httpapi_test

import (
	"fmt"
	"slices"
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
		if l.Total != many {
			t.Fatalf("page at %d: total %d, want %d", offset, l.Total, many)
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
}
