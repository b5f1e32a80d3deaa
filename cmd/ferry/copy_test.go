package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1048576", 1 << 20, false},
		{"64K", 64 << 10, false},
		{"256M", 256 << 20, false},
		{"256MiB", 256 << 20, false},
		{"1g", 1 << 30, false},
		{"0", 0, false},
		{"", 0, true},
		{"-1M", 0, true},
		{"12X", 0, true},
		{"99999999999T", 0, true},
	} {
		got, err := parseSize(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestParseDeadline(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if got, err := parseDeadline("90m", now); err != nil || !got.Equal(now.Add(90*time.Minute)) {
		t.Errorf("90m: %v %v", got, err)
	}
	if got, err := parseDeadline("2026-11-22T00:00:00Z", now); err != nil || got.Hour() != 0 || got.Day() != 22 {
		t.Errorf("RFC 3339: %v %v", got, err)
	}
	for _, bad := range []string{"", "-5m", "tomorrow"} {
		if _, err := parseDeadline(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGlobusStyle(t *testing.T) {
	got := strings.Join(globusStyle([]string{"copy", "-cc", "4", "-pp", "-p", "2", "-r", "-cc=3", "a", "b"}), " ")
	if want := "copy --cc 4 --pp -p 2 -r --cc=3 a b"; got != want {
		t.Fatalf("globusStyle = %q, want %q", got, want)
	}
}

func TestParsePlace(t *testing.T) {
	for _, tc := range []struct {
		in                  string
		addr, user, pass, p string
		local               bool
		bad                 string
	}{
		{in: "ftp://host:2811/a/b", addr: "host:2811", p: "/a/b"},
		{in: "ftp://u:p%40ss@host/x", addr: "host:21", user: "u", pass: "p@ss", p: "/x"},
		{in: "ftp://[::1]:5000", addr: "[::1]:5000", p: "/"},
		{in: "/tmp/some/file", local: true, p: "/file"},
		{in: "/tmp/some/dir/", local: true, p: "/"},
		{in: "gsiftp://h/x", bad: "GSI"},
		{in: "http://h/x", bad: "unsupported scheme"},
		{in: "ftp:///x", bad: "no host"},
	} {
		pl, err := parsePlace(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s: error %v, want one saying %q", tc.in, err, tc.bad)
			}
			continue
		}
		if err != nil || pl.path != tc.p || (pl.local != "") != tc.local ||
			(!tc.local && (pl.ep.Addr != tc.addr || pl.ep.User != tc.user || pl.ep.Password != tc.pass)) {
			t.Errorf("%s: %+v %v", tc.in, pl, err)
		}
	}
}
