package main

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"ferry/service/api"
	"ferry/service/domain"
)

// asUser adds the user name (password name-pw) to s's service and
// returns the CLI logged in as them, with a home of its own.
func (s *service) asUser(name string) *service {
	s.t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.db.CreateUser(s.t.Context(), &domain.User{Name: name, PasswordHash: string(hash)}); err != nil {
		s.t.Fatal(err)
	}
	u := &service{t: s.t, url: s.url, home: s.t.TempDir(), db: s.db}
	u.ok(name+"-pw\n", "login", "--url", s.url, "--username", name)
	return u
}

// TestCLIEndpointSearch: endpoint search finds by owner#name or
// description, in any case, among yours and public ones, or yours only;
// endpoint list is the same search.
func TestCLIEndpointSearch(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	_, url := gridEndpoint(t)
	s.login()
	bob := s.asUser("bob")
	s.ok("", "endpoint", "add", "lab-scratch", "--server", url, "--description", "Cluster scratch")
	s.ok("", "endpoint", "add", "home", "--server", url)
	bob.ok("", "endpoint", "add", "archive", "--server", url, "--description", "tape SCRATCH copy", "--public")
	bob.ok("", "endpoint", "add", "hidden-scratch", "--server", url)

	names := func(args ...string) string {
		t.Helper()
		var l api.EndpointList
		s.okJSON(&l, args...)
		var out []string
		for _, ep := range l.Data {
			out = append(out, ep.DisplayName)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"endpoint", "search", "scratch"}, "alice#lab-scratch bob#archive"},
		{[]string{"endpoint", "search", "SCRATCH", "--filter-scope", "my-endpoints"}, "alice#lab-scratch"},
		{[]string{"endpoint", "search", "bob#"}, "bob#archive"},
		{[]string{"endpoint", "search"}, "alice#home alice#lab-scratch bob#archive"},
		{[]string{"endpoint", "search", "scratch", "--limit", "1"}, "alice#lab-scratch"},
		{[]string{"endpoint", "search", "nothing-like-it"}, ""},
		{[]string{"endpoint", "list", "--filter", "scratch"}, "alice#lab-scratch"},
		{[]string{"endpoint", "list", "--all", "--filter", "scratch"}, "alice#lab-scratch bob#archive"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if got := names(tc.args...); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
	if out := s.ok("", "endpoint", "search", "arch", "-F", "unix"); !strings.HasPrefix(out, "bob#archive\t") || strings.Count(out, "\n") != 1 {
		t.Fatalf("endpoint search -F unix:\n%s", out)
	}
	s.fails(exitUsage, `filter scope "shared": want all or my-endpoints`, "endpoint", "search", "x", "--filter-scope", "shared")
	s.fails(exitUsage, "accepts at most 1 arg", "endpoint", "search", "a", "b")
}
