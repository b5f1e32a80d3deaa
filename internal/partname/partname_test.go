package partname

import "testing"

func TestFor(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"b", ".ferry-af63df4c8601f1a5.part"},
		{"d/b", "d/.ferry-af63df4c8601f1a5.part"},
		{"/x/y/b", "/x/y/.ferry-af63df4c8601f1a5.part"},
	} {
		if got := For(tc.p); got != tc.want {
			t.Errorf("For(%q) = %q, want %q", tc.p, got, tc.want)
		}
	}
	if For("/a/b") == For("/a/c") {
		t.Error("two names of one directory share a temporary name")
	}
}

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{For("b"), true},
		{".ferry-0123456789abcdef.part", true},
		{".ferry-0123456789ABCDEF.part", false},
		{".ferry-0123.part", false},
		{"ferry-0123456789abcdef.part", false},
		{".ferry-0123456789abcdef.partial", false},
		{"b", false},
	} {
		if got := Is(tc.name); got != tc.want {
			t.Errorf("Is(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
