package storage_test

import (
	"context"
	"errors"
	"testing"

	"ferry/storage"
)

// opened is a Driver that remembers how it was opened.
type opened struct {
	storage.Driver
	by, arg string
}

func opener(by string) storage.Opener {
	return func(_ context.Context, arg string) (storage.Driver, error) {
		if arg == "bad" {
			return nil, errors.New("bad argument")
		}
		return opened{by: by, arg: arg}, nil
	}
}

func TestRegistryOpen(t *testing.T) {
	r := storage.Registry{Default: opener("default")}
	r.Register("synthetic", opener("synthetic"))
	r.Register("s3", opener("s3"))
	for _, tc := range []struct {
		root, by, arg string
		err           bool
	}{
		{"/data", "default", "/data", false},
		{"data/a:b", "default", "data/a:b", false},
		{"c:/x", "default", "c:/x", false},
		{"synthetic:files=10", "synthetic", "files=10", false},
		{"synthetic:", "synthetic", "", false},
		{"s3://bucket/prefix", "s3", "//bucket/prefix", false},
		{"Synthetic:files=10", "default", "Synthetic:files=10", false},
		{"synthetic:bad", "", "", true},
	} {
		t.Run(tc.root, func(t *testing.T) {
			d, err := r.Open(t.Context(), tc.root)
			if tc.err {
				if err == nil {
					t.Fatalf("Open(%q) = %v, want an error", tc.root, d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.root, err)
			}
			if o := d.(opened); o.by != tc.by || o.arg != tc.arg {
				t.Errorf("Open(%q) opened by %s with %q, want %s with %q", tc.root, o.by, o.arg, tc.by, tc.arg)
			}
		})
	}
	if _, err := (&storage.Registry{}).Open(t.Context(), "/data"); err == nil {
		t.Error("a Registry without Default opened a directory")
	}
}

func TestRegisterMistakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scheme string
	}{{"empty", ""}, {"colon", "a:b"}, {"slash", "a/b"}, {"twice", "sink"}} {
		t.Run(tc.name, func(t *testing.T) {
			var r storage.Registry
			r.Register("sink", opener("sink"))
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tc.scheme)
				}
			}()
			r.Register(tc.scheme, opener("x"))
		})
	}
}
