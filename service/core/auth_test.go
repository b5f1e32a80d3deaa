package core_test

import (
	"strings"
	"testing"
	"time"

	"ferry/service/core"
	"ferry/service/domain"
)

// Logins: a wrong password is refused and counted, too many failures for
// one name make the next try wait (its password is not looked at), and a
// token made by a login authenticates its user until it is revoked.
func TestLoginAndTokens(t *testing.T) {
	s, _, _ := newService(t)
	ctx := t.Context()
	now := time.Now()
	s.Now = func() time.Time { return now }
	s.LoginLimits = core.LoginLimits{Free: 2, FreeAddress: 100}
	carol, err := s.AddUser(ctx, "carol", "", "carol-pw")
	if err != nil {
		t.Fatal(err)
	}
	login := func(name, pw, kind string) (domain.LoginResult, error) {
		return s.Login(ctx, domain.LoginRequest{Username: name, Password: pw, Remote: "192.0.2.1:5000", Kind: kind, Name: "test"})
	}
	tests := []struct {
		name, user, pw, kind string
		code, msg            string
		retry                bool
	}{
		{"bad kind", "carol", "carol-pw", "cookie", domain.EInvalid, `kind "cookie": want api or session`, false},
		{"wrong 1", "carol", "x", "", domain.EUnauthorized, "wrong user name or password", false},
		{"wrong 2", "carol", "y", "", domain.EUnauthorized, "wrong user name or password", false},
		{"throttled", "carol", "carol-pw", "", domain.EThrottled, "too many failed logins: try again in 1 s", true},
		{"no such user", "dave", "x", "", domain.EUnauthorized, "wrong user name or password", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := login(tc.user, tc.pw, tc.kind)
			wantErr(t, err, tc.code, tc.msg)
			if (res.RetryAfter > 0) != tc.retry {
				t.Errorf("RetryAfter %d", res.RetryAfter)
			}
		})
	}
	now = now.Add(2 * time.Second) // the wait is over
	res, err := login("carol", "carol-pw", domain.TokenSession)
	if err != nil || res.User.ID != carol.ID || res.Token.Kind != domain.TokenSession || !strings.HasPrefix(res.Secret, "ferry_") {
		t.Fatalf("login: %+v, %v", res, err)
	}
	u, tok, err := s.Authenticate(ctx, domain.TokenSession, res.Secret, nil)
	if err != nil || u.ID != carol.ID || tok.ID != res.Token.ID {
		t.Fatalf("Authenticate: %v %v, %v", u.Name, tok.ID, err)
	}
	_, _, err = s.Authenticate(ctx, domain.TokenAPI, res.Secret, nil)
	wantErr(t, err, domain.EUnauthorized, "unknown token")
	_, _, err = s.Authenticate(ctx, domain.TokenSession, res.Secret, func(domain.Token) error {
		return domain.Errorf(domain.EForbidden, "no")
	})
	wantErr(t, err, domain.EForbidden, "no")
	if err := s.RevokeToken(ctx, carol, res.Token.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Authenticate(ctx, domain.TokenSession, res.Secret, nil)
	wantErr(t, err, domain.EUnauthorized, "expired or revoked")
}

// The operator's user administration: names are checked, passwords
// hashed and changed, SSH keys parsed.
func TestUserAdministration(t *testing.T) {
	s, _, _ := newService(t)
	ctx := t.Context()
	_, err := s.AddUser(ctx, "bad name", "", "pw")
	wantErr(t, err, domain.EInvalid, "")
	_, err = s.AddUser(ctx, "alice", "", "pw")
	wantErr(t, err, domain.EConflict, "user alice already exists")
	erin, err := s.AddUser(ctx, "erin", "erin@example.org", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, erin, "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login(ctx, domain.LoginRequest{Username: "erin", Password: "new", Remote: "192.0.2.2:1"}); err != nil {
		t.Fatalf("login with the new password: %v", err)
	}
	_, err = s.AddSSHKey(ctx, erin, "not a key")
	wantErr(t, err, domain.EInvalid, "")
	k, err := s.AddSSHKey(ctx, erin, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl erin@laptop\n")
	if err != nil || !strings.HasPrefix(k.Fingerprint, "SHA256:") {
		t.Fatalf("AddSSHKey: %+v, %v", k, err)
	}
	if ks, err := s.SSHKeys(ctx, erin); err != nil || len(ks) != 1 || ks[0].ID != k.ID {
		t.Fatalf("SSHKeys: %+v, %v", ks, err)
	}
	if err := s.RemoveUser(ctx, erin); err != nil {
		t.Fatal(err)
	}
	_, err = s.UserByName(ctx, "erin")
	wantErr(t, err, domain.ENotFound, "")
}

// Bookmarks name paths on endpoints their owner may use; another user's
// bookmark is not found.
func TestBookmarks(t *testing.T) {
	s, alice, bob := newService(t)
	ctx := t.Context()
	ep, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("a"), Servers: servers("ftp://h:2811")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateBookmark(ctx, alice, "home", "", ep.ID)
	wantErr(t, err, domain.EInvalid, "a bookmark needs a path")
	_, err = s.CreateBookmark(ctx, bob, "home", "/h", ep.ID)
	wantErr(t, err, domain.ENotFound, "no endpoint")
	b, err := s.CreateBookmark(ctx, alice, "home", "/h//x/", "a")
	if err != nil || b.EndpointName != "alice#a" {
		t.Fatalf("CreateBookmark: %+v, %v", b, err)
	}
	_, err = s.Bookmark(ctx, bob, b.ID)
	wantErr(t, err, domain.ENotFound, `no bookmark "`+b.ID+`"`)
	if b, err = s.UpdateBookmark(ctx, alice, b.ID, new("work"), nil); err != nil || b.Name != "work" {
		t.Fatalf("UpdateBookmark: %+v, %v", b, err)
	}
	wantErr(t, s.DeleteBookmark(ctx, bob, b.ID), domain.ENotFound, "no bookmark")
	wantErr(t, s.DeleteBookmark(ctx, alice, b.ID), "", "")
}
