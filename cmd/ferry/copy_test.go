package main

import (
	"os"
	"path/filepath"
	"slices"
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
		pos       []string // the arguments left: SRC and DSTs
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
		{args: []string{"--pp", "32", "a"}, pp: 32, pos: []string{"a"}}, // destinations in --mc
		{args: []string{"a", "b", "c", "--fanout", "1"}, pos: []string{"a", "b", "c"}},
		{args: []string{"--pp", "32"}, bad: "requires at least 1 arg(s)"},
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

// TestCopyTransferFlags: ferry copy takes ferry transfer's names for the
// flags they share, and still the old --preserve-mtime.
func TestCopyTransferFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		verify   bool
		preserve bool
		sync     string
		bad      string
	}{
		{args: []string{"a", "b"}},
		{args: []string{"--verify-checksum", "a", "b"}, verify: true},
		{args: []string{"--no-verify-checksum", "a", "b"}},
		{args: []string{"--preserve-timestamp", "a", "b"}, preserve: true},
		{args: []string{"--preserve-mtime", "a", "b"}, preserve: true},
		{args: []string{"-s", "checksum", "a", "b"}, sync: "checksum"},
		{args: []string{"--sync-level", "size", "a", "b"}, sync: "size"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := newCopyCmd()
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags()
			verify, _ := f.GetBool("verify-checksum")
			preserve, _ := f.GetBool("preserve-timestamp")
			sync, _ := f.GetString("sync-level")
			if verify != tc.verify || preserve != tc.preserve || sync != tc.sync {
				t.Fatalf("verify %v preserve %v sync %q; want %v %v %q", verify, preserve, sync, tc.verify, tc.preserve, tc.sync)
			}
		})
	}
}

func TestParsePlace(t *testing.T) {
	t.Setenv("X509_USER_PROXY", filepath.Join(t.TempDir(), "none"))
	for _, tc := range []struct {
		in                  string
		addr, user, pass, p string
		local, ssh          bool
		bad                 string
	}{
		{in: "sshftp://alice@host/data/f", addr: "host:22", p: "/data/f", ssh: true},
		{in: "sshftp://127.0.0.1:2222", addr: "127.0.0.1:2222", p: "/", ssh: true},
		{in: "sshftp://u:pw@host/x", bad: "no password"},
		{in: "ftp://host:2811/a/b", addr: "host:2811", p: "/a/b"},
		{in: "ftp://u:p%40ss@host/x", addr: "host:21", user: "u", pass: "p@ss", p: "/x"},
		{in: "ftp://[::1]:5000", addr: "[::1]:5000", p: "/"},
		{in: "/tmp/some/file", local: true, p: "/file"},
		{in: "/tmp/some/dir/", local: true, p: "/"},
		{in: "gsiftp://h/x", bad: "no grid proxy"},
		{in: "http://h/x", bad: `scheme "http" is not supported: want ftp://, gsiftp:// or sshftp://, or a local path`},
		{in: "ftp:///x", bad: "no host"},
		{in: "ftp://h:99999/x", bad: "port 99999 is out of range (1 to 65535)"},
		{in: "sshftp://[::1]/x", addr: "[::1]:22", p: "/x", ssh: true},
		{in: "ftp://u:secret@h:x/", bad: "not a URL"},
	} {
		pl, err := parsePlace(tc.in, "")
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) || strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: error %v, want one saying %q, without the password", tc.in, err, tc.bad)
			}
			continue
		}
		if err != nil || pl.path != tc.p || (pl.local != "") != tc.local || (pl.ep.Dial != nil) != tc.ssh ||
			(!tc.local && (pl.ep.Addr != tc.addr || pl.ep.User != tc.user || pl.ep.Password != tc.pass)) {
			t.Errorf("%s: %+v %v", tc.in, pl, err)
		}
	}
}

func TestSSHDialer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		command []string
		remote  string
	}{
		{name: "defaults", remote: ""},
		{name: "ferry's", env: map[string]string{"FERRY_SSH_COMMAND": " ssh  -F /cfg ", "FERRY_REMOTE_SSHFTP": "ferry gridftp --stdio", "GLOBUS_REMOTE_SSHFTP": "gct"},
			command: []string{"ssh", "-F", "/cfg"}, remote: "ferry gridftp --stdio"},
		{name: "globus-url-copy's", env: map[string]string{"GLOBUS_REMOTE_SSHFTP": "/opt/sshftp"}, remote: "/opt/sshftp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sshDialer("alice", func(k string) string { return tc.env[k] })
			if !slices.Equal(d.Command, tc.command) || d.Remote != tc.remote || d.User != "alice" {
				t.Fatalf("%+v", d)
			}
		})
	}
}

func TestReadMC(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // joined by " "; "" with bad
		bad        bool
	}{
		{"lines", "ftp://a:1/x\nftp://b:2/y\n", "ftp://a:1/x ftp://b:2/y", false},
		// globus-url-copy stops at a blank line and drops the rest.
		{"blank line keeps the rest", "ftp://a:1/x\n\n  \nftp://b:2/y", "ftp://a:1/x ftp://b:2/y", false},
		{"comments and CRLF", "# sites\r\nftp://a:1/x\r\n", "ftp://a:1/x", false},
		{"per-hop options", "ftp://a:1/x?cc=1;P=2\n", "", true},
		{"empty", "\n# none\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "mc")
			os.WriteFile(f, []byte(tc.text), 0o644)
			got, err := readMC(f)
			if (err != nil) != tc.bad || strings.Join(got, " ") != tc.want {
				t.Fatalf("readMC = %q, %v", got, err)
			}
		})
	}
	if _, err := readMC(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file was read")
	}
}

func TestParseVia(t *testing.T) {
	got, err := parseVia([]string{"10.1.2.3=ftp://u:p@head:2811", "node7:2812=ftp://head2"})
	if err != nil {
		t.Fatal(err)
	}
	if h := got["10.1.2.3:21"]; h.Addr != "head:2811" || h.User != "u" || h.Password != "p" {
		t.Errorf("10.1.2.3: %+v", h)
	}
	if h := got["node7:2812"]; h.Addr != "head2:21" {
		t.Errorf("node7: %+v", h)
	}
	for _, bad := range []string{"head", "=ftp://h", "10.0.0.1=head:21", "10.0.0.1=http://h"} {
		if _, err := parseVia([]string{bad}); err == nil {
			t.Errorf("--via %q accepted", bad)
		}
	}
}
