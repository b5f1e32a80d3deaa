package synclevel

import (
	"encoding/json"
	"strings"
	"testing"
)

func ptr(n int) *int { return &n }

// TestLevels walks every level through each of its encodings and back.
func TestLevels(t *testing.T) {
	for _, c := range []struct {
		l    Level
		name string
		api  *int
		rec  string // as the service records it
	}{
		{None, "none", nil, "-1"},
		{Exists, "exists", ptr(0), "0"},
		{Size, "size", ptr(1), "1"},
		{Mtime, "mtime", ptr(2), "2"},
		{Checksum, "checksum", ptr(3), "3"},
	} {
		if got := c.l.String(); got != c.name {
			t.Errorf("%d: String %q, want %q", int(c.l), got, c.name)
		}
		if got, err := Parse(c.name); got != c.l || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.name, got, err, c.l)
		}
		got := c.l.API()
		if (got == nil) != (c.api == nil) || got != nil && *got != *c.api {
			t.Errorf("%v: API %v, want %v", c.l, got, c.api)
		}
		if back, err := FromAPI(got); back != c.l || err != nil {
			t.Errorf("FromAPI(%v) = %v, %v; want %v", got, back, err, c.l)
		}
		if c.api != nil {
			s := c.rec
			if back, err := Parse(s); back != c.l || err != nil {
				t.Errorf("Parse(%q) = %v, %v; want %v", s, back, err, c.l)
			}
		}
		b, err := json.Marshal(c.l)
		if string(b) != c.rec || err != nil {
			t.Errorf("%v: json %s, %v; want %s", c.l, b, err, c.rec)
		}
		var back Level = -7
		if err := json.Unmarshal(b, &back); back != c.l || err != nil {
			t.Errorf("json %s read as %v, %v; want %v", b, back, err, c.l)
		}
	}
}

// TestZeroIsNone: options left zero copy every file.
func TestZeroIsNone(t *testing.T) {
	var o struct{ L Level }
	if o.L != None || o.L.API() != nil {
		t.Errorf("zero level %v, want none", o.L)
	}
	if l, err := Parse(""); l != None || err != nil {
		t.Errorf(`Parse("") = %v, %v; want none`, l, err)
	}
}

func TestRejects(t *testing.T) {
	for _, s := range []string{"4", "-1", "Size", "sizes", " 1", "always"} {
		if l, err := Parse(s); err == nil || !strings.Contains(err.Error(), "want exists, size, mtime or checksum (0-3)") {
			t.Errorf("Parse(%q) = %v, %v; want an error naming the levels", s, l, err)
		}
	}
	for _, n := range []int{-1, 4, 100} {
		if l, err := FromAPI(&n); err == nil || !strings.Contains(err.Error(), "want 0 (exists), 1 (size), 2 (mtime) or 3 (checksum)") {
			t.Errorf("FromAPI(%d) = %v, %v; want an error naming the levels", n, l, err)
		}
	}
	for _, s := range []string{"4", "-2", `"size"`, "1.5"} {
		var l Level
		if err := json.Unmarshal([]byte(s), &l); err == nil {
			t.Errorf("json %s read as %v, want an error", s, l)
		}
	}
	if b, err := json.Marshal(Level(9)); err == nil {
		t.Errorf("Level(9) written as %s, want an error", b)
	}
	if s := Level(9).String(); s != "Level(9)" {
		t.Errorf("Level(9).String() = %q", s)
	}
}

// TestUsageSaysWhatEachCompares: the help names every level, its number
// and what it compares.
func TestUsageSaysWhatEachCompares(t *testing.T) {
	want := "skip a file the destination has: exists (0) if it is there, of the source's size; size (1) if the sizes match; " +
		"mtime (2) if the sizes match and the source is not newer; checksum (3) if the sizes and the checksums match (default: copy every file)"
	if Usage != want {
		t.Errorf("Usage\n%s\nwant\n%s", Usage, want)
	}
}
