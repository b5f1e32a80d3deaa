package engine_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"

	"ferry/engine"
	"ferry/storage"
)

// TestSkipSourceErrors: with Options.SkipSourceErrors, a missing source
// item, a source file that vanishes when it is sent and an unreadable
// source directory are skipped (Outcome SkippedError) and the rest
// arrives; without it the copy fails as before. A destination's refusal
// is never skipped.
func TestSkipSourceErrors(t *testing.T) {
	root := t.TempDir()
	v := &vanishing{root: root}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { return locked{d} })
	vsrc := startEndpoint(t, root, func(d storage.Driver) storage.Driver { v.Driver = d; return v })
	writeFile(t, filepath.Join(root, "a"), []byte("a"))
	writeFile(t, filepath.Join(root, "d", "f"), []byte("f"))
	writeFile(t, filepath.Join(root, "t", "ok"), []byte("ok"))
	writeFile(t, filepath.Join(root, "t", "locked", "x"), []byte("x"))
	for _, tc := range []struct {
		name    string
		src     *endpoint
		items   []engine.Item
		skip    bool
		wantErr bool
		skipped []string // source paths skipped for an error
		arrived []string
		failed  int
	}{
		{"missing item skipped", src, []engine.Item{{Src: "/a", Dst: "/a"}, {Src: "/nope", Dst: "/nope"}}, true, false, []string{"/nope"}, []string{"a"}, 0},
		{"missing item fails", src, []engine.Item{{Src: "/a", Dst: "/a"}, {Src: "/nope", Dst: "/nope"}}, false, true, nil, nil, 0},
		{"vanished file skipped", vsrc, []engine.Item{{Src: "/d", Dst: "/d"}}, true, false, []string{"/d/f"}, nil, 0},
		{"vanished file fails", vsrc, []engine.Item{{Src: "/d", Dst: "/d"}}, false, false, nil, nil, 1},
		{"unreadable directory skipped", src, []engine.Item{{Src: "/t", Dst: "/t"}}, true, false, []string{"/t/locked"}, []string{"t/ok"}, 0},
		{"unreadable directory fails", src, []engine.Item{{Src: "/t", Dst: "/t"}}, false, false, nil, []string{"t/ok"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(root, "d", "f"), []byte("f")) // vanishing removes it
			dst := startEndpoint(t, "", nil)
			o := fastOptions()
			o.SkipSourceErrors = tc.skip
			rec := &recorder{}
			res, err := engine.Copy(context.Background(), tc.src.Endpoint, dst.Endpoint, tc.items, o, rec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if res.SkippedErrors != len(tc.skipped) || res.Failed != tc.failed {
				t.Errorf("%d skipped for source errors, %d failed; want %d, %d", res.SkippedErrors, res.Failed, len(tc.skipped), tc.failed)
			}
			for _, s := range tc.skipped {
				if r := rec.done[s]; r.Outcome != engine.SkippedError || !engine.SourceError(r.Err) {
					t.Errorf("%s: %v (%v), want skipped for a source error", s, r.Outcome, r.Err)
				}
			}
			for _, a := range tc.arrived {
				if _, err := os.Stat(filepath.Join(dst.root, a)); err != nil {
					t.Errorf("%s did not arrive: %v", a, err)
				}
			}
		})
	}
}

// locked refuses to list directories named "locked", as a directory its
// server may not read.
type locked struct{ storage.Driver }

func (l locked) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	if path.Base(name) == "locked" {
		return nil, fmt.Errorf("read %s: %w", name, storage.ErrPermission)
	}
	return l.Driver.ReadDir(ctx, name)
}
