package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/service/domain"
)

// TestListingSorts: a listing holds every entry listed, each field as it
// came, sorted by name, whether it was sorted in memory (one run) or
// merged from runs on disk; its pages are slices of that order.
func TestListingSorts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var fis []domain.FileInfo
	for i := range 1000 {
		fi := domain.FileInfo{Name: fmt.Sprintf("n%x", rng.Uint32()), Type: "file", Size: rng.Int64N(1 << 40), Permissions: "0644"}
		switch i % 4 {
		case 0:
			fi.Type, fi.Size, fi.Modified = "dir", 0, time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)).UTC()
		case 1:
			fi.Name, fi.User, fi.Group = fi.Name+"\xff\xfe", "u", "g" // not UTF-8
		case 2:
			fi.Modified = time.Unix(-rng.Int64N(1<<33), 0).UTC()
		}
		fis = append(fis, fi)
	}
	want := slices.Clone(fis)
	slices.SortFunc(want, func(a, b domain.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	list := func(fn func(domain.FileInfo) error) error {
		for _, fi := range fis {
			if err := fn(fi); err != nil {
				return err
			}
		}
		return nil
	}
	for _, run := range []int{1, 7, 999, 1000, 5000} {
		t.Run(fmt.Sprint("run ", run), func(t *testing.T) {
			l, err := makeListing(list, run, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer l.f.Close()
			if l.total != len(want) {
				t.Fatalf("total %d, want %d", l.total, len(want))
			}
			for _, p := range []struct{ offset, limit int }{{0, 1000}, {0, 1}, {255, 3}, {256, 300}, {513, 1000}, {999, 5}, {1000, 5}} {
				got, _, err := l.page(t.Context(), p.offset, p.limit)
				if err != nil {
					t.Fatal(err)
				}
				w := want[min(p.offset, len(want)):min(p.offset+p.limit, len(want))]
				if !slices.EqualFunc(got, w, func(a, b domain.FileInfo) bool { return a == b }) {
					t.Errorf("page %+v differs: %d entries, want %d", p, len(got), len(w))
				}
			}
		})
	}
	broken := errors.New("listing broke")
	_, err := makeListing(func(fn func(domain.FileInfo) error) error {
		if err := list(fn); err != nil {
			return err
		}
		return broken
	}, 7, time.Now())
	if !errors.Is(err, broken) {
		t.Errorf("a listing that fails: %v, want %v", err, broken)
	}
}
