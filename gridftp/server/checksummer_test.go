package server_test

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"ferry/gridftp/server"
	"ferry/storage"
)

// knowing is a driver that knows the MD5 of /known without reading it
// (and says so wrongly, so that a reply shows who answered), fails for
// /broken, and cannot tell for anything else.
type knowing struct{ storage.Driver }

func (knowing) Checksum(_ context.Context, name, alg string) (string, error) {
	switch {
	case name == "/broken":
		return "", fmt.Errorf("checksum %s: %w", name, storage.ErrPermission)
	case name == "/known" && strings.EqualFold(alg, "md5"):
		return "feedfacefeedfacefeedfacefeedface", nil
	}
	return "", fmt.Errorf("checksum %s %s: %w", name, alg, errors.ErrUnsupported)
}

// TestCKSMAsksTheDriver: a driver that is a storage.Checksummer answers
// CKSM of a whole file; a range, or what the driver cannot tell, is read.
func TestCKSMAsksTheDriver(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.FS = knowing{s.FS} })
	for _, name := range []string{"known", "other", "broken"} {
		env.file(name, []byte("hello"))
	}
	md5Of := func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
	sha1Of := func(s string) string { h := sha1.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
	c := env.login()
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"CKSM MD5 0 -1 known", "213 feedfacefeedfacefeedfacefeedface"},
		{"CKSM md5 0 5 /known", "213 feedfacefeedfacefeedfacefeedface"},
		{"CKSM MD5 0 3 known", "213 " + md5Of("hel")},
		{"CKSM MD5 1 -1 known", "213 " + md5Of("ello")},
		{"CKSM SHA1 0 -1 known", "213 " + sha1Of("hello")},
		{"CKSM MD5 0 -1 other", "213 " + md5Of("hello")},
		{"CKSM MD5 0 -1 broken", "550-GlobusError: v=1 c=PERMISSION_DENIED"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			c.send(tc.cmd)
			if r := c.read(); !strings.HasPrefix(r.String(), tc.want) {
				t.Errorf("%s: %q, want %q", tc.cmd, r.String(), tc.want)
			}
		})
	}
}
