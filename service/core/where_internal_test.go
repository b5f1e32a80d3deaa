package core

import (
	"errors"
	"fmt"
	"testing"
)

// TestWhereCache: a task's paths are read once, a failed read is not
// kept, and a full cache starts again.
func TestWhereCache(t *testing.T) {
	var c whereCache
	loads := 0
	load := func(w itemsWhere, err error) func() (itemsWhere, error) {
		return func() (itemsWhere, error) { loads++; return w, err }
	}
	if _, err := c.get("t1", load(itemsWhere{}, errors.New("store down"))); err == nil {
		t.Fatal("the load's error was lost")
	}
	for range 3 {
		if w, err := c.get("t1", load(itemsWhere{"/a/", "/b/"}, nil)); err != nil || w != (itemsWhere{"/a/", "/b/"}) {
			t.Fatalf("get: %+v, %v", w, err)
		}
	}
	if loads != 2 {
		t.Errorf("%d loads, want 2 (the failed one, then one)", loads)
	}
	for i := range whereCacheSize {
		c.get(fmt.Sprint("x", i), load(itemsWhere{}, nil))
	}
	if len(c.m) > whereCacheSize {
		t.Errorf("%d entries, want at most %d", len(c.m), whereCacheSize)
	}
}
