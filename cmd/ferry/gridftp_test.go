package main

import (
	"io"
	"strings"
	"testing"
)

// ferry gridftp refuses flags that cannot work before it listens.
func TestGridFTPFlagErrors(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--root", root}, "no login allowed"},
		{[]string{"--root", root, "--anonymous-write", "--password-file", "p"}, "--anonymous-write needs --anonymous"},
		{[]string{"--root", root, "--anonymous", "--idle-timeout", "0s"}, "must be positive"},
		{[]string{"--root", root, "--anonymous", "--login-timeout", "-1s"}, "must be positive"},
		{[]string{"--root", root, "--anonymous", "--max-streams", "0"}, "must be positive"},
		{[]string{"--root", root, "--anonymous", "--max-sessions-per-address", "-1"}, "not negative"},
		{[]string{"--root", root, "--anonymous", "--max-file-size", "huge"}, "--max-file-size"},
		{[]string{"--root", root, "--anonymous", "--max-checksum-holes", "-5"}, "--max-checksum-holes"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "tar:bin/tar"}, "--popen-whitelist"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-env", "PATH"}, "--popen-env"},
		{[]string{"--root", root, "--anonymous", "--popen-env", "A=1"}, "--popen-env needs --popen-whitelist"},
		{[]string{"--root", root, "--anonymous", "--popen-anonymous"}, "--popen-anonymous needs --popen-whitelist"},
		{[]string{"--root", root, "--anonymous", "--popen-user", "nobody"}, "--popen-user needs --popen-whitelist"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-args", "tar"}, "--popen-args"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-args", "/bin/cat=@cat"}, "not a whitelisted program"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-args", "/bin/tar=@tarball"}, "no built-in profile"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-args", "/bin/tar={file}"}, "only {path}"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-user", "no-such-user-here"}, "--popen-user"},
		{[]string{"--root", root, "--anonymous", "--popen-whitelist", "/bin/tar", "--popen-user", "root"}, "never run as root"},
	}
	for _, tt := range tests {
		cmd := newGridFTPCmd()
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error about %s", tt.args, err, tt.want)
		}
	}
}

// A limit flag's 0 means no limit, which is the server field's -1 (a
// field's 0 is its default).
func TestSizeFlag(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"16T", 16 << 40, true},
		{"4G", 4 << 30, true},
		{"1048576", 1 << 20, true},
		{"0", -1, true},
		{"-1", 0, false},
		{"many", 0, false},
	}
	for _, tt := range tests {
		got, err := sizeFlag("--x", tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("sizeFlag(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
