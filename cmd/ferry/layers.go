package main

import (
	"fmt"
	"maps"
	"os/user"
	"strings"

	"ferry/stack"
	"ferry/stack/compress"
	"ferry/stack/forward"
	"ferry/stack/popen"
	"ferry/stack/tarstream"
)

// layers are the disk stack layers every ferry server offers: the file
// layer, ordering, the tar and checksum-list layers of many-file
// transfers, and zstd. Multicast forwarding (gridftp_multicast), which
// makes the server connect to other hosts, and popen, which runs
// programs, come only when ferry gridftp is told (--multicast,
// --popen-whitelist, with --popen-args, --popen-env, --popen-user and
// --popen-anonymous), as GCT's -fs-whitelist does.
func layers() stack.Registry {
	reg := stack.Kinds()
	maps.Copy(reg, tarstream.Kinds())
	maps.Copy(reg, compress.Kinds())
	return reg
}

// multicastLayers are the layers --multicast adds.
func multicastLayers() stack.Registry { return forward.Kinds() }

// popenKind is the popen layer of --popen-whitelist and the flags that
// go with it.
func popenKind(whitelist string, args, env []string, runAs string, anonymous bool) (stack.Kind, error) {
	programs, err := popen.ParseWhitelist(whitelist)
	if err != nil {
		return stack.Kind{}, fmt.Errorf("--popen-whitelist: %w", err)
	}
	for _, decl := range args {
		if err := popen.Declare(programs, decl); err != nil {
			return stack.Kind{}, fmt.Errorf("--popen-args: %w", err)
		}
	}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return stack.Kind{}, fmt.Errorf("--popen-env %q: want KEY=VALUE", kv)
		}
	}
	if runAs != "" {
		u, err := user.Lookup(runAs)
		if err != nil {
			return stack.Kind{}, fmt.Errorf("--popen-user: %w", err)
		}
		if u.Uid == "0" {
			return stack.Kind{}, fmt.Errorf("--popen-user %s: programs never run as root", runAs)
		}
	}
	return popen.Kind(popen.Config{Programs: programs, Env: env, Anonymous: anonymous, User: runAs}), nil
}

// popenFlagSet is the first flag given (changed) of those that need
// --popen-whitelist, "" if none.
func popenFlagSet(changed func(name string) bool) string {
	for _, name := range []string{"popen-env", "popen-args", "popen-user", "popen-anonymous"} {
		if changed(name) {
			return name
		}
	}
	return ""
}
