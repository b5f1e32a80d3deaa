package popen

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
)

// archive is a tar stream of the members: name, or name "->" target
// for a symlink, or name "=>" target for a hard link; files hold 3000
// bytes, so a stream spans many chunks.
func archive(t *testing.T, members ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, m := range members {
		h := &tar.Header{Name: m, Mode: 0o644, Size: 3000, Typeflag: tar.TypeReg}
		if name, target, ok := strings.Cut(m, " -> "); ok {
			h = &tar.Header{Name: name, Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink}
		} else if name, target, ok := strings.Cut(m, " => "); ok {
			h = &tar.Header{Name: name, Linkname: target, Mode: 0o644, Typeflag: tar.TypeLink}
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		w.Write(bytes.Repeat([]byte("x"), int(h.Size)))
	}
	w.Close()
	return b.Bytes()
}

// TestGuard: tar x's input passes chunk by chunk while its members stay
// inside; the chunk that completes the first header that would not is
// refused, before it goes on, and every chunk after it.
func TestGuard(t *testing.T) {
	long := strings.Repeat("d/", 80) + "f" // a GNU or PAX long name
	for _, tt := range []struct {
		members []string
		bad     string // the member refused; "" none
	}{
		{[]string{"a", "b/c", "in -> b", "in2 -> b/./c", "hard => a", long}, ""},
		{[]string{"a", "out -> /etc"}, "out"},
		{[]string{"a", "b/c", "out -> ../x"}, "out"},
		{[]string{"out -> b/../../x"}, "out"},
		{[]string{"a", "/abs"}, "/abs"},
		{[]string{"a", "b/../../x"}, "b/../../x"},
		{[]string{"a", "hard => ../x"}, "hard"},
		{[]string{"a", long + " -> " + "/" + long}, long},
	} {
		data := archive(t, tt.members...)
		check, err := tarCheck("")
		if err != nil {
			t.Fatal(err)
		}
		g := newGuard(check)
		// The offset of the refused member's header, and its end.
		badAt := -1
		if tt.bad != "" {
			badAt = bytes.Index(data, []byte(tt.bad)) // in its header, or a long name's
		}
		var refusedAt int = -1
		for off := 0; off < len(data); off += 700 {
			chunk := data[off:min(off+700, len(data))]
			if err := g.Check(chunk); err != nil {
				if refusedAt < 0 {
					refusedAt = off
				}
				if !strings.Contains(err.Error(), tt.bad) {
					t.Errorf("%v: refused with %v, want %q", tt.members, err, tt.bad)
				}
			} else if refusedAt >= 0 {
				t.Errorf("%v: a chunk at %d passed after one was refused", tt.members, off)
			}
		}
		g.Close()
		switch {
		case tt.bad == "" && refusedAt >= 0:
			t.Errorf("%v: refused at %d", tt.members, refusedAt)
		case tt.bad != "" && refusedAt < 0:
			t.Errorf("%v: %s passed", tt.members, tt.bad)
		case tt.bad != "" && refusedAt+700 <= badAt:
			t.Errorf("%v: refused at %d, before the header at %d", tt.members, refusedAt, badAt)
		}
	}
}
