package gsilogin

import "testing"

func TestHostDN(t *testing.T) {
	for _, tt := range []struct {
		dn, host string
		want     bool
	}{
		{"/O=Grid/CN=host/gridftp.example.org", "gridftp.example.org", true},
		{"/O=Grid/CN=gridftp.example.org", "GridFTP.example.org", true},
		{"/O=Grid/CN=ftp/127.0.0.1", "127.0.0.1", true},
		{`/O=Grid/OU=ca1/CN=host\/127.0.0.1`, "127.0.0.1", true},
		{"/O=Grid/CN=gsiftp/127.0.0.1", "127.0.0.1", true},
		{"/O=Grid/CN=host/other.example.org", "gridftp.example.org", false},
		{"/O=Grid/CN=gridftp.example.org/CN=proxy", "gridftp.example.org", false},
		{"/O=Grid/CN=Alice", "alice.example.org", false},
		{"/O=Grid", "127.0.0.1", false},
	} {
		if got := HostDN(tt.dn, tt.host); got != tt.want {
			t.Errorf("HostDN(%q, %q) = %v", tt.dn, tt.host, got)
		}
	}
}
