package gridftp_test

import (
	"testing"

	"ferry/gridftp"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ftp://alice:s3cret@host:2811/a/b", "ftp://alice:xxxxx@host:2811/a/b"},
		{"gsiftp://alice@host/a", "gsiftp://alice@host/a"},
		{"ftp://host/a:b@c", "ftp://host/a:b@c"},
		{"ftp://a:p%40ss%3Aword@h/x", "ftp://a:xxxxx@h/x"},
		{"to ftp://a:pw@h/x and sshftp://b:pw2@g/y.", "to ftp://a:xxxxx@h/x and sshftp://b:xxxxx@g/y."},
		{"ftp://a:pw@h", "ftp://a:xxxxx@h"},
		{"ftp://a:p@w@h/x", "ftp://a:xxxxx@h/x"},
		// A multicast stack, its URLs encoded once and twice.
		{"file,gridftp_multicast:urls%3D%23ftp%253A//mc%253ASekr1t@127.0.0.1%253A41261/f?%23ftp%25253A//u%25253Apw@h/g",
			"file,gridftp_multicast:urls%3D%23ftp%253A//mc%253Axxxxx@127.0.0.1%253A41261/f?%23ftp%25253A//u%25253Axxxxx@h/g"},
		{"urls=#ftp://u:pw@h/f?cc=1;#ftp://v:pw2@h/g", "urls=#ftp://u:xxxxx@h/f?cc=1;#ftp://v:xxxxx@h/g"},
		{"no url here: a:b@c", "no url here: a:b@c"},
		{"", ""},
	} {
		if got := gridftp.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
