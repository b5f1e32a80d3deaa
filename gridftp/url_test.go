package gridftp_test

import (
	"cmp"
	"errors"
	"strings"
	"testing"

	"ferry/gridftp"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		in         string
		addr       string // Addr
		user, pass string
		path       string
		str        string // String, when not in
		bad        string // in the error
		badIs      error
	}{
		{in: "ftp://h", addr: "h:21"},
		{in: "gsiftp://h/", addr: "h:2811", path: "/"},
		{in: "sshftp://h/x", addr: "h:22", path: "/x"},
		{in: "ftp://h:2811/a/b", addr: "h:2811", path: "/a/b"},
		{in: "gsiftp://[::1]:5000/d/", addr: "[::1]:5000", path: "/d/"},
		{in: "ftp://[fe80::1]/x", addr: "[fe80::1]:21", path: "/x"},
		{in: "ftp://[fe80::1%25eth0]:21/x", addr: "[fe80::1%eth0]:21", path: "/x"},
		{in: "ftp://u:p%40ss%3Aw%2F@h:2/f", addr: "h:2", user: "u", pass: "p@ss:w/", path: "/f", str: "ftp://u:p%40ss%3Aw%2F@h:2/f"},
		{in: "ftp://a%20b@h/x%20y", addr: "h:21", user: "a b", path: "/x y"},
		{in: "sshftp://me@h/x", addr: "h:22", user: "me", path: "/x"},
		{in: "ftp://h/a?q=1", addr: "h:21", path: "/a"},
		{in: "FTP://h/a", addr: "h:21", path: "/a", str: "ftp://h/a"},
		{in: "http://h/x", bad: `scheme "http" is not supported: want ftp://, gsiftp:// or sshftp://`},
		{in: "/local/path", bad: `scheme "" is not supported`},
		{in: "ftp:///x", bad: "no host", badIs: gridftp.ErrNoHost},
		{in: "ftp:h", bad: "no host", badIs: gridftp.ErrNoHost},
		{in: "ftp://:21/x", bad: "no host", badIs: gridftp.ErrNoHost},
		{in: "ftp://h:99999", bad: "port 99999 is out of range (1 to 65535)"},
		{in: "ftp://h:0", bad: "port 0 is out of range (1 to 65535)"},
		{in: "ftp://h:x/", bad: "not a URL", badIs: gridftp.ErrNotURL},
		{in: "ftp://u:secret@h:x/", bad: "not a URL", badIs: gridftp.ErrNotURL},
		{in: "ftp://h\x7f/", bad: "not a URL", badIs: gridftp.ErrNotURL},
	}
	for _, tt := range tests {
		u, err := gridftp.Parse(tt.in)
		if tt.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tt.bad) || strings.Contains(err.Error(), "secret") {
				t.Errorf("Parse(%q) = %v, want an error with %q and no password", tt.in, err, tt.bad)
			}
			if tt.badIs != nil && !errors.Is(err, tt.badIs) {
				t.Errorf("Parse(%q) = %v, want %v", tt.in, err, tt.badIs)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		pass, _ := u.User.Password()
		if u.Addr() != tt.addr || u.User.Username() != tt.user || pass != tt.pass || u.Path != tt.path {
			t.Errorf("Parse(%q) = addr %q user %q pass %q path %q, want %q %q %q %q", tt.in, u.Addr(), u.User.Username(), pass, u.Path, tt.addr, tt.user, tt.pass, tt.path)
		}
		if want := cmp.Or(tt.str, tt.in); u.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, u.String(), want)
		}
	}
}

func TestDefaultPort(t *testing.T) {
	for scheme, want := range map[string]string{"ftp": "21", "gsiftp": "2811", "sshftp": "22", "http": "", "": ""} {
		if got := gridftp.DefaultPort(scheme); got != want {
			t.Errorf("DefaultPort(%q) = %q, want %q", scheme, got, want)
		}
	}
}

func TestURLServerAndKind(t *testing.T) {
	tests := []struct {
		in, server string
		gsi, ssh   bool
	}{
		{"ftp://u:p@h/x", "ftp://h:21", false, false},
		{"gsiftp://[::1]/", "gsiftp://[::1]:2811", true, false},
		{"ftp://[fe80::1%25eth0]/", "ftp://[fe80::1%25eth0]:21", false, false},
		{"sshftp://h:2222/x", "sshftp://h:2222", false, true},
	}
	for _, tt := range tests {
		u, err := gridftp.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if u.Server() != tt.server || u.GSI() != tt.gsi || u.SSH() != tt.ssh {
			t.Errorf("Parse(%q): Server %q GSI %v SSH %v, want %q %v %v", tt.in, u.Server(), u.GSI(), u.SSH(), tt.server, tt.gsi, tt.ssh)
		}
	}
}

func TestURLCheck(t *testing.T) {
	tests := []struct {
		u   gridftp.URL
		bad string // "" for none
	}{
		{gridftp.URL{Scheme: "gsiftp", Host: "h", Port: "2811"}, ""},
		{gridftp.URL{Scheme: "ftp", Host: "::1"}, ""},
		{gridftp.URL{Scheme: "http", Host: "h"}, `scheme "http" is not supported`},
		{gridftp.URL{Scheme: "ftp"}, "no host"},
		{gridftp.URL{Scheme: "ftp", Host: "h", Port: "-5"}, "port -5 is out of range (1 to 65535)"},
		{gridftp.URL{Scheme: "ftp", Host: "h", Port: "x"}, "port x is out of range"},
		{gridftp.URL{Scheme: "ftp", Host: "h", Port: "65536"}, "port 65536 is out of range"},
	}
	for _, tt := range tests {
		err := tt.u.Check()
		if tt.bad == "" && err != nil || tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("%+v.Check() = %v, want %q", tt.u, err, tt.bad)
		}
	}
}
