package storage

import (
	"context"
	"fmt"
	"strings"
)

// Opener opens the tree that a root names; arg is the root without its
// "scheme:" ("files=10" of "synthetic:files=10", "//bucket/prefix" of
// "s3://bucket/prefix").
type Opener func(ctx context.Context, arg string) (Driver, error)

// Registry picks the driver of a root by its scheme, the text before its
// first colon, as rclone picks a backend: "synthetic:files=10" opens with
// the Opener registered as "synthetic". A root whose text before the colon
// is no registered scheme (a plain directory, "/data", "a:b") opens with
// Default. The zero Registry has no schemes; it is not safe for
// concurrent Register.
type Registry struct {
	// Default opens roots with no registered scheme: local directories.
	Default Opener
	schemes map[string]Opener
}

// Register makes open the opener of roots that start with "scheme:". It
// panics if scheme is empty, holds a colon or a slash, or is registered
// already: each is a mistake in the program that wires the drivers.
func (r *Registry) Register(scheme string, open Opener) {
	if scheme == "" || strings.ContainsAny(scheme, ":/") || open == nil {
		panic(fmt.Sprintf("storage: Register(%q): not a scheme and an opener", scheme))
	}
	if _, dup := r.schemes[scheme]; dup {
		panic(fmt.Sprintf("storage: Register(%q): registered twice", scheme))
	}
	if r.schemes == nil {
		r.schemes = map[string]Opener{}
	}
	r.schemes[scheme] = open
}

// Open opens the tree root names.
func (r *Registry) Open(ctx context.Context, root string) (Driver, error) {
	if scheme, arg, ok := strings.Cut(root, ":"); ok {
		if open := r.schemes[scheme]; open != nil {
			d, err := open(ctx, arg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", scheme, err)
			}
			return d, nil
		}
	}
	if r.Default == nil {
		return nil, fmt.Errorf("root %q: no driver for it", root)
	}
	return r.Default(ctx, root)
}
