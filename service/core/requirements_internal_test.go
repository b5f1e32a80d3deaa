package core

import (
	"fmt"
	"testing"

	"ferry/service/domain"
)

// TestRequirements: what an activation takes, by the endpoint's login.
func TestRequirements(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   domain.Endpoint
		want string // Type/Name, required (!) and private (*) of each
	}{
		{"anonymous", domain.Endpoint{Auth: domain.AuthAnonymous}, "[]"},
		{"password", domain.Endpoint{Auth: domain.AuthPassword}, "[password/username! password/password!*]"},
		{"grid proxy", domain.Endpoint{Auth: domain.AuthGSI}, "[proxy/proxy!* proxy/username]"},
		{"grid proxy or MyProxy", domain.Endpoint{Auth: domain.AuthGSI, MyProxyServer: "mp.example:7512"},
			"[proxy/proxy* proxy/username myproxy/myproxy_username myproxy/myproxy_passphrase*]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range requirements(tc.ep) {
				s := r.Type + "/" + r.Name
				if r.Required {
					s += "!"
				}
				if r.Private {
					s += "*"
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("requirements = %v, want %s", got, tc.want)
			}
		})
	}
}
