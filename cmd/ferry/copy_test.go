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

func TestParseChunkSize(t *testing.T) {
	for in, want := range map[string]int64{"0": -1, "64M": 64 << 20, "x": 0} {
		got, err := parseChunkSize(in)
		if got != want || (err != nil) != (in == "x") {
			t.Errorf("parseChunkSize(%q) = %d, %v; want %d", in, got, err, want)
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
	got := strings.Join(globusStyle([]string{"copy", "-cc", "4", "-pp", "-p", "2", "-dcpriv", "-r", "-cc=3", "a", "--", "-pp", "b"}), " ")
	if want := "copy --cc 4 -p 2 --encrypt -r --cc=3 a -- -pp b"; got != want {
		t.Fatalf("globusStyle = %q, want %q", got, want)
	}
}

// TestCopyArgs parses ferry copy's command line as main does, in both
// ferry's and globus-url-copy's styles.
func TestCopyArgs(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		pp, cc, p int
		pos       []string // the arguments left: SRC and DST
		bad       string
	}{
		{args: []string{"--pp", "32", "a", "b"}, pp: 32},
		{args: []string{"--pp=32", "a", "b"}, pp: 32},
		{args: []string{"-pp", "a", "b"}}, // globus-url-copy's switch: ferry chooses
		{args: []string{"--pp", "a", "b"}},
		{args: []string{"a", "b", "-pp"}},
		{args: []string{"-pp", "8", "a", "b"}, pp: 8},
		{args: []string{"-pp=8", "a", "b"}, pp: 8},
		{args: []string{"-cc", "4", "a", "b"}, cc: 4},
		{args: []string{"--cc", "4", "a", "b"}, cc: 4},
		{args: []string{"-cc=4", "a", "b"}, cc: 4},
		{args: []string{"-pp", "-cc", "8", "-p", "4", "a", "b"}, cc: 8, p: 4},
		{args: []string{"-r", "--pp", "16", "-cc", "2", "ftp://h/a/", "b/"}, pp: 16, cc: 2, pos: []string{"ftp://h/a/", "b/"}},
		{args: []string{"--", "-pp", "b"}, pos: []string{"-pp", "b"}},
		{args: []string{"--pp", "32", "a"}, bad: "accepts 2 arg(s)"},
		{args: []string{"-cc", "a", "b"}, bad: "invalid argument"},
		{args: []string{"-pp=x", "a", "b"}, bad: "invalid argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := newCopyCmd()
			err := cmd.ParseFlags(globusStyle(tc.args))
			if err == nil {
				err = cmd.ValidateArgs(cmd.Flags().Args())
			}
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("error %v, want one saying %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.pos == nil {
				tc.pos = []string{"a", "b"}
			}
			f := cmd.Flags()
			pp, _ := f.GetInt("pp")
			cc, _ := f.GetInt("cc")
			p, _ := f.GetInt("parallelism")
			if pp != tc.pp || cc != tc.cc || p != tc.p || strings.Join(f.Args(), " ") != strings.Join(tc.pos, " ") {
				t.Fatalf("--pp %d --cc %d -p %d, args %q; want %d %d %d, %q", pp, cc, p, f.Args(), tc.pp, tc.cc, tc.p, tc.pos)
			}
		})
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
