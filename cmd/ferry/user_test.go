package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUserAddCreates checks that ferry user add says when --data holds no
// database and it creates one, and only then.
func TestUserAddCreates(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		name, stderr string
	}{
		{"alice", "no database in " + data + ": creating " + filepath.Join(data, "ferry.db") + "\n"},
		{"bob", ""},
	} {
		root := newRoot()
		var out, errOut strings.Builder
		root.SetIn(strings.NewReader("secret\n"))
		root.SetOut(&out)
		root.SetErr(&errOut)
		if code := execute(t.Context(), root, []string{"user", "add", tc.name, "--data", data}, &errOut); code != 0 {
			t.Fatalf("user add %s: exit %d: %s", tc.name, code, errOut.String())
		}
		if errOut.String() != tc.stderr || out.String() != "added user "+tc.name+"\n" {
			t.Errorf("user add %s: stdout %q, stderr %q; want stderr %q", tc.name, out.String(), errOut.String(), tc.stderr)
		}
	}
}
