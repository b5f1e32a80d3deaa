package storetest

import (
	"testing"
	"time"

	"ferry/service/domain"
)

var accountTests = []test{
	{"Users", testUsers},
	{"RemoveUser", testRemoveUser},
	{"Tokens", testTokens},
	{"SSHKeys", testSSHKeys},
	{"Bookmarks", testBookmarks},
	{"Endpoints", testEndpoints},
	{"EndpointList", testEndpointList},
	{"Activations", testActivations},
	{"Relays", testRelays},
	{"MyProxyEndpoints", testMyProxyEndpoints},
}

func testUsers(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	if alice.ID == 0 || alice.Created.IsZero() {
		t.Fatalf("CreateUser left ID or Created unset: %+v", alice)
	}
	bob := f.user("bob")
	if bob.ID == alice.ID {
		t.Fatalf("two users with ID %d", bob.ID)
	}
	got, err := f.s.UserByName(f.ctx, "alice")
	f.ok(err)
	equal(t, "UserByName", got, alice)
	got, err = f.s.UserByID(f.ctx, bob.ID)
	f.ok(err)
	equal(t, "UserByID", got, bob)

	f.ok(f.s.SetPassword(f.ctx, alice.ID, "new hash"))
	got, err = f.s.UserByID(f.ctx, alice.ID)
	f.ok(err)
	if got.PasswordHash != "new hash" {
		t.Fatalf("password hash %q after SetPassword", got.PasswordHash)
	}

	runErrCases(t, []errCase{
		{"taken name", func() error { return f.s.CreateUser(f.ctx, &domain.User{Name: "alice", PasswordHash: "x"}) }, domain.EConflict},
		{"missing name", func() error { _, err := f.s.UserByName(f.ctx, "carol"); return err }, domain.ENotFound},
		{"missing ID", func() error { _, err := f.s.UserByID(f.ctx, bob.ID+100); return err }, domain.ENotFound},
		{"password of missing user", func() error { return f.s.SetPassword(f.ctx, bob.ID+100, "h") }, domain.ENotFound},
	})
}

func testSSHKeys(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	key := func(u domain.User, line, fp string) domain.SSHKey {
		t.Helper()
		k := domain.SSHKey{UserID: u.ID, Line: line, Fingerprint: fp}
		f.ok(f.s.AddSSHKey(f.ctx, &k))
		if k.ID == 0 || k.Created.IsZero() {
			t.Fatalf("AddSSHKey left ID or Created unset: %+v", k)
		}
		return k
	}
	a1 := key(alice, "ssh-ed25519 AAAA1 laptop", "SHA256:a1")
	a2 := key(alice, "ssh-ed25519 AAAA2 desk", "SHA256:a2")
	b1 := key(bob, "ssh-ed25519 AAAA1 bob's copy", "SHA256:a1") // another user may have the same key
	for _, c := range []struct {
		user domain.User
		want []domain.SSHKey
	}{{alice, []domain.SSHKey{a1, a2}}, {bob, []domain.SSHKey{b1}}} {
		got, err := f.s.SSHKeys(f.ctx, c.user.ID)
		f.ok(err)
		equal(t, "SSHKeys of "+c.user.Name, got, c.want)
	}
	runErrCases(t, []errCase{
		{"same key twice", func() error {
			return f.s.AddSSHKey(f.ctx, &domain.SSHKey{UserID: alice.ID, Line: "x", Fingerprint: "SHA256:a2"})
		}, domain.EConflict},
		{"another user's key", func() error { return f.s.DeleteSSHKey(f.ctx, bob.ID, a1.ID) }, domain.ENotFound},
		{"missing key", func() error { return f.s.DeleteSSHKey(f.ctx, alice.ID, b1.ID+100) }, domain.ENotFound},
	})
	f.ok(f.s.DeleteSSHKey(f.ctx, alice.ID, a1.ID))
	got, err := f.s.SSHKeys(f.ctx, alice.ID)
	f.ok(err)
	equal(t, "SSHKeys after delete", got, []domain.SSHKey{a2})
}

func testTokens(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	token := func(u domain.User, kind, hash string, expires time.Time) domain.Token {
		t.Helper()
		tk := domain.Token{UserID: u.ID, Kind: kind, Name: "laptop", Hash: hash, Expires: expires}
		f.ok(f.s.CreateToken(f.ctx, &tk))
		if tk.ID == 0 || tk.Created.IsZero() {
			t.Fatalf("CreateToken left ID or Created unset: %+v", tk)
		}
		return tk
	}
	a1 := token(alice, domain.TokenAPI, "a1", t0.Add(time.Hour))
	a2 := token(alice, domain.TokenSession, "a2", time.Time{})
	b1 := token(bob, domain.TokenAPI, "b1", time.Time{})

	got, err := f.s.TokenByHash(f.ctx, "a1")
	f.ok(err)
	equal(t, "TokenByHash", got, a1)
	for _, c := range []struct {
		user domain.User
		want []domain.Token
	}{{alice, []domain.Token{a1, a2}}, {bob, []domain.Token{b1}}} {
		got, err := f.s.Tokens(f.ctx, c.user.ID)
		f.ok(err)
		equal(t, "Tokens of "+c.user.Name, got, c.want)
	}

	runErrCases(t, []errCase{
		{"missing hash", func() error { _, err := f.s.TokenByHash(f.ctx, "nope"); return err }, domain.ENotFound},
		{"revoke another user's", func() error { return f.s.RevokeToken(f.ctx, bob.ID, a1.ID) }, domain.ENotFound},
		{"touch missing", func() error { return f.s.TouchToken(f.ctx, b1.ID+100, t0) }, domain.ENotFound},
	})
	if got, _ := f.s.TokenByHash(f.ctx, "a1"); got.Revoked {
		t.Fatal("another user revoked a token")
	}

	f.ok(f.s.RevokeToken(f.ctx, alice.ID, a1.ID))
	f.ok(f.s.TouchToken(f.ctx, a2.ID, t0))
	got, err = f.s.TokenByHash(f.ctx, "a1")
	f.ok(err)
	if !got.Revoked || got.Valid(t0) {
		t.Fatalf("revoked token: %+v", got)
	}
	got, err = f.s.TokenByHash(f.ctx, "a2")
	f.ok(err)
	if !got.LastUsed.Equal(t0) || got.Revoked {
		t.Fatalf("touched token: %+v, want LastUsed %v", got, t0)
	}
}

func testEndpoints(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	dtn := domain.Endpoint{OwnerID: alice.ID, Name: "dtn", Description: "Data transfer node",
		Servers: []string{"ftp://dtn1:2811", "ftp://dtn2:2811"}, Auth: domain.AuthPassword,
		DefaultDir: "/~/", Public: true, MaxConcurrent: 4}
	f.ok(f.s.CreateEndpoint(f.ctx, &dtn))
	wantUUID(t, dtn.ID)
	if dtn.Created.IsZero() {
		t.Fatal("CreateEndpoint left Created unset")
	}
	dtn.Owner = "alice"
	bobs := f.endpoint(bob, "dtn", false, 0) // the same name, another owner

	got, err := f.s.Endpoint(f.ctx, dtn.ID)
	f.ok(err)
	equal(t, "Endpoint", got, dtn)
	got, err = f.s.EndpointByName(f.ctx, "bob", "dtn")
	f.ok(err)
	equal(t, "EndpointByName", got, bobs)

	upd := dtn
	upd.OwnerID, upd.Owner = bob.ID, "bob" // not changed by UpdateEndpoint
	upd.Name, upd.Description, upd.Servers, upd.Auth = "dtn2", "renamed", []string{"ftp://new:2811"}, domain.AuthAnonymous
	upd.DefaultDir, upd.Public, upd.MaxConcurrent = "/data/", false, 0
	f.ok(f.s.UpdateEndpoint(f.ctx, upd))
	got, err = f.s.Endpoint(f.ctx, dtn.ID)
	f.ok(err)
	upd.OwnerID, upd.Owner = alice.ID, "alice"
	equal(t, "updated endpoint", got, upd)

	// Deleting an endpoint deletes its activations.
	for _, u := range []domain.User{alice, bob} {
		f.ok(f.s.PutActivation(f.ctx, domain.Activation{UserID: u.ID, EndpointID: dtn.ID, Sealed: []byte("s"), Expires: t0}))
	}
	f.ok(f.s.DeleteEndpoint(f.ctx, dtn.ID))
	f.endpoint(bob, "other", false, 0)

	runErrCases(t, []errCase{
		{"taken name", func() error {
			return f.s.CreateEndpoint(f.ctx, &domain.Endpoint{OwnerID: bob.ID, Name: "dtn", Auth: domain.AuthAnonymous})
		}, domain.EConflict},
		{"rename to a taken name", func() error {
			e := bobs
			e.Name = "other"
			return f.s.UpdateEndpoint(f.ctx, e)
		}, domain.EConflict},
		{"missing ID", func() error { _, err := f.s.Endpoint(f.ctx, "00000000-0000-4000-8000-000000000000"); return err }, domain.ENotFound},
		{"missing name", func() error { _, err := f.s.EndpointByName(f.ctx, "bob", "nope"); return err }, domain.ENotFound},
		{"another owner's name", func() error { _, err := f.s.EndpointByName(f.ctx, "carol", "dtn"); return err }, domain.ENotFound},
		{"update missing", func() error { return f.s.UpdateEndpoint(f.ctx, upd) }, domain.ENotFound},
		{"deleted", func() error { _, err := f.s.Endpoint(f.ctx, dtn.ID); return err }, domain.ENotFound},
		{"delete deleted", func() error { return f.s.DeleteEndpoint(f.ctx, dtn.ID) }, domain.ENotFound},
		{"activation of deleted", func() error { _, err := f.s.Activation(f.ctx, bob.ID, dtn.ID); return err }, domain.ENotFound},
	})
}

func testEndpointList(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob, carol := f.user("alice"), f.user("bob"), f.user("carol")
	f.endpoint(alice, "dtn", true, 0)
	f.endpoint(alice, "laptop", false, 0)
	f.endpoint(bob, "dtn", true, 0)
	f.endpoint(bob, "secret", false, 0)
	shared := f.endpoint(carol, "Shared-Data", true, 0)
	shared.Description = "Genomics 50%_archive"
	f.ok(f.s.UpdateEndpoint(f.ctx, shared))

	for _, c := range []struct {
		name     string
		user     domain.User
		text     string
		mineOnly bool
		page     domain.Page
		want     []string
		total    int
	}{
		{"own and public", alice, "", false, domain.Page{}, []string{"alice#dtn", "alice#laptop", "bob#dtn", "carol#Shared-Data"}, 4},
		{"another user", bob, "", false, domain.Page{}, []string{"alice#dtn", "bob#dtn", "bob#secret", "carol#Shared-Data"}, 4},
		{"mine only", alice, "", true, domain.Page{}, []string{"alice#dtn", "alice#laptop"}, 2},
		{"name, any case", alice, "DTN", false, domain.Page{}, []string{"alice#dtn", "bob#dtn"}, 2},
		{"owner#name", alice, "bob#", false, domain.Page{}, []string{"bob#dtn"}, 1},
		{"description", alice, "genomics", false, domain.Page{}, []string{"carol#Shared-Data"}, 1},
		{"LIKE characters are literal", alice, "50%_a", false, domain.Page{}, []string{"carol#Shared-Data"}, 1},
		{"underscore is literal", bob, "s_cret", false, domain.Page{}, nil, 0},
		{"another user's private one", alice, "secret", false, domain.Page{}, nil, 0},
		{"mine only and text", bob, "dtn", true, domain.Page{}, []string{"bob#dtn"}, 1},
		{"page", alice, "", false, domain.Page{Limit: 2, Offset: 1}, []string{"alice#laptop", "bob#dtn"}, 4},
		{"past the end", alice, "", false, domain.Page{Limit: 2, Offset: 10}, nil, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			eps, total, err := f.s.Endpoints(f.ctx, c.user.ID, c.text, c.mineOnly, c.page)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range eps {
				names = append(names, e.DisplayName())
			}
			equal(t, "endpoints", names, c.want)
			if total != c.total {
				t.Fatalf("total %d, want %d", total, c.total)
			}
		})
	}
}

func testActivations(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	ep := f.endpoint(alice, "dtn", true, 0)
	a := domain.Activation{UserID: alice.ID, EndpointID: ep.ID, Sealed: []byte("sealed 1"), Expires: t0.Add(12 * time.Hour), Created: t0}
	f.ok(f.s.PutActivation(f.ctx, a))
	got, err := f.s.Activation(f.ctx, alice.ID, ep.ID)
	f.ok(err)
	equal(t, "Activation", got, a)

	a.Sealed, a.Expires, a.Created = []byte("sealed 2"), t0.Add(time.Hour), t0.Add(time.Minute)
	f.ok(f.s.PutActivation(f.ctx, a))
	got, err = f.s.Activation(f.ctx, alice.ID, ep.ID)
	f.ok(err)
	equal(t, "replaced Activation", got, a)

	// A gsi activation: a sealed grid proxy of several kilobytes, and
	// the identity it logs in as; replacing it with a password's
	// clears the subject.
	a.Sealed, a.Subject = make([]byte, 12<<10), "/O=Grid/OU=ferry-test/CN=Alice O'Neil"
	for i := range a.Sealed {
		a.Sealed[i] = byte(i * 7)
	}
	f.ok(f.s.PutActivation(f.ctx, a))
	got, err = f.s.Activation(f.ctx, alice.ID, ep.ID)
	f.ok(err)
	equal(t, "gsi Activation", got, a)
	a.Sealed, a.Subject = []byte("sealed 3"), ""
	f.ok(f.s.PutActivation(f.ctx, a))
	got, err = f.s.Activation(f.ctx, alice.ID, ep.ID)
	f.ok(err)
	equal(t, "password Activation after gsi", got, a)

	runErrCases(t, []errCase{
		{"another user's", func() error { _, err := f.s.Activation(f.ctx, bob.ID, ep.ID); return err }, domain.ENotFound},
		{"delete another user's", func() error { return f.s.DeleteActivation(f.ctx, bob.ID, ep.ID) }, domain.ENotFound},
		{"delete", func() error { return f.s.DeleteActivation(f.ctx, alice.ID, ep.ID) }, ""},
		{"deleted", func() error { _, err := f.s.Activation(f.ctx, alice.ID, ep.ID); return err }, domain.ENotFound},
		{"delete deleted", func() error { return f.s.DeleteActivation(f.ctx, alice.ID, ep.ID) }, domain.ENotFound},
	})
}

// testRelays: an endpoint reached only through another (Via) keeps its
// relay's ID and shows its name; the relay is not deleted while an
// endpoint names it; a task to an endpoint behind a relay uses the relay
// too, for the methods that select tasks by an endpoint they use.
func testRelays(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	head := f.endpoint(alice, "head", true, 0)
	src := f.endpoint(alice, "src", false, 0)
	inner := domain.Endpoint{OwnerID: alice.ID, Name: "inner", Servers: []string{"ftp://10.1.0.7:2811"},
		Auth: domain.AuthPassword, Via: head.ID}
	f.ok(f.s.CreateEndpoint(f.ctx, &inner))
	inner.Owner, inner.ViaName = "alice", "alice#head"
	got, err := f.s.Endpoint(f.ctx, inner.ID)
	f.ok(err)
	equal(t, "endpoint behind a relay", got, inner)
	got, err = f.s.EndpointByName(f.ctx, "alice", "inner")
	f.ok(err)
	equal(t, "by name", got, inner)
	eps, _, err := f.s.Endpoints(f.ctx, alice.ID, "inner", true, domain.Page{})
	f.ok(err)
	equal(t, "listed", eps, []domain.Endpoint{inner})
	got, err = f.s.Endpoint(f.ctx, head.ID)
	f.ok(err)
	equal(t, "the relay", got, head)

	behind, err := f.s.EndpointsVia(f.ctx, head.ID)
	f.ok(err)
	equal(t, "EndpointsVia", behind, []domain.Endpoint{inner})
	behind, err = f.s.EndpointsVia(f.ctx, inner.ID)
	f.ok(err)
	if len(behind) != 0 {
		t.Fatalf("EndpointsVia(inner): %+v, want none", behind)
	}

	// A task to inner uses head: deactivating head pauses it,
	// activating it again resumes it.
	task := f.task(alice, src, inner, t0)
	n, err := f.s.Deactivate(f.ctx, alice.ID, head.ID, domain.NiceNotActivated, t0)
	f.ok(err)
	if n != 1 || f.get(task.ID).Status != domain.StatusInactive {
		t.Fatalf("Deactivate of the relay paused %d tasks, want the task to its endpoint", n)
	}
	n, err = f.s.Reactivate(f.ctx, alice.ID, head.ID, t0)
	f.ok(err)
	if n != 1 || f.get(task.ID).Status != domain.StatusActive {
		t.Fatalf("Reactivate of the relay resumed %d tasks, want the task to its endpoint", n)
	}
	multi := domain.Task{UserID: alice.ID, Type: domain.TypeTransfer, SrcEndpoint: src.ID, RequestTime: t0,
		Items:        []domain.Item{{Src: "/a/", Dst: "/b/", Recursive: true}},
		Destinations: []domain.Destination{{Endpoint: head.ID}, {Endpoint: inner.ID, Paths: []string{"/c/"}}}}
	f.ok(f.s.CreateTask(f.ctx, &multi))
	other := f.endpoint(alice, "other", false, 0)
	multi2 := domain.Task{UserID: alice.ID, Type: domain.TypeTransfer, SrcEndpoint: src.ID, RequestTime: t0,
		Items:        []domain.Item{{Src: "/a/", Dst: "/b/", Recursive: true}},
		Destinations: []domain.Destination{{Endpoint: other.ID}, {Endpoint: inner.ID, Paths: []string{"/c/"}}}}
	f.ok(f.s.CreateTask(f.ctx, &multi2))
	n, err = f.s.Deactivate(f.ctx, alice.ID, head.ID, domain.NiceNotActivated, t0)
	f.ok(err)
	if n != 3 {
		t.Fatalf("Deactivate of the relay paused %d tasks, want 3 (one destination behind it in each)", n)
	}

	// Changing and clearing the relay.
	inner.Via = other.ID
	f.ok(f.s.UpdateEndpoint(f.ctx, inner))
	got, err = f.s.Endpoint(f.ctx, inner.ID)
	f.ok(err)
	if got.Via != other.ID || got.ViaName != "alice#other" {
		t.Fatalf("after UpdateEndpoint: via %q (%q), want %s", got.Via, got.ViaName, other.ID)
	}
	f.ok(f.s.DeleteEndpoint(f.ctx, head.ID)) // no longer anyone's relay

	runErrCases(t, []errCase{
		{"delete a relay", func() error { return f.s.DeleteEndpoint(f.ctx, other.ID) }, domain.EConflict},
		{"create behind a missing relay", func() error {
			return f.s.CreateEndpoint(f.ctx, &domain.Endpoint{OwnerID: alice.ID, Name: "lost", Auth: domain.AuthAnonymous,
				Servers: []string{"ftp://x:21"}, Via: head.ID})
		}, domain.ENotFound},
		{"update to a missing relay", func() error {
			e := inner
			e.Via = head.ID
			return f.s.UpdateEndpoint(f.ctx, e)
		}, domain.ENotFound},
	})
	inner.Via = ""
	f.ok(f.s.UpdateEndpoint(f.ctx, inner))
	got, err = f.s.Endpoint(f.ctx, inner.ID)
	f.ok(err)
	if got.Via != "" || got.ViaName != "" {
		t.Fatalf("after clearing: via %q (%q)", got.Via, got.ViaName)
	}
	f.ok(f.s.DeleteEndpoint(f.ctx, other.ID))
}

// testMyProxyEndpoints: a gsi endpoint keeps its MyProxy server and the
// server's DN (created, changed, cleared); EndpointsByMyProxy lists the
// gsi endpoints a user may use (its own, public ones) that name a server,
// and no other.
func testMyProxyEndpoints(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	gsiEP := func(owner domain.User, name, server string, public bool) domain.Endpoint {
		t.Helper()
		e := domain.Endpoint{OwnerID: owner.ID, Name: name, Servers: []string{"gsiftp://" + name + ".example:2811"},
			Auth: domain.AuthGSI, Public: public, MyProxyServer: server}
		f.ok(f.s.CreateEndpoint(f.ctx, &e))
		e.Owner = owner.Name
		return e
	}
	const mp, other = "myproxy.example:7512", "myproxy.example:7513"
	a1 := gsiEP(alice, "a1", mp, false)
	a2 := gsiEP(alice, "a2", mp, false)
	gsiEP(alice, "a3", other, false)
	gsiEP(alice, "a4", "", false)
	b1 := gsiEP(bob, "b1", mp, true)
	gsiEP(bob, "b2", mp, false)
	got, err := f.s.Endpoint(f.ctx, a1.ID)
	f.ok(err)
	equal(t, "gsi endpoint with a MyProxy server", got, a1)

	a2.MyProxyServerDN = "/O=Grid/CN=host/myproxy.example"
	f.ok(f.s.UpdateEndpoint(f.ctx, a2))
	got, err = f.s.EndpointByName(f.ctx, "alice", "a2")
	f.ok(err)
	equal(t, "MyProxy server DN", got, a2)

	names := func(user domain.User, server string) []string {
		t.Helper()
		eps, err := f.s.EndpointsByMyProxy(f.ctx, user.ID, server)
		f.ok(err)
		var out []string
		for _, e := range eps {
			out = append(out, e.DisplayName())
		}
		return out
	}
	equal(t, "alice's and public endpoints of "+mp, names(alice, mp), []string{"alice#a1", "alice#a2", "bob#b1"})
	equal(t, "bob's endpoints of "+mp, names(bob, mp), []string{"bob#b1", "bob#b2"})
	equal(t, "of "+other, names(alice, other), []string{"alice#a3"})
	equal(t, "of another user's server", names(bob, other), []string(nil))
	equal(t, `of ""`, names(alice, ""), []string(nil))

	// Made anonymous, or cleared: no longer listed.
	b1.Auth, b1.MyProxyServer = domain.AuthAnonymous, ""
	b1.Servers = []string{"ftp://b1.example:2811"}
	f.ok(f.s.UpdateEndpoint(f.ctx, b1))
	a1.MyProxyServer = ""
	f.ok(f.s.UpdateEndpoint(f.ctx, a1))
	equal(t, "after changes", names(alice, mp), []string{"alice#a2"})
}

// testRemoveUser removes alice: refused while a task of hers, or one of
// bob's that uses her endpoint, has not ended, and while her endpoint is
// the head node of bob's; then gone with all that was hers, and bob
// left as he was.
func testRemoveUser(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	aEP, bEP := f.endpoint(alice, "a", true, 0), f.endpoint(bob, "b", false, 0)
	behind := f.endpoint(alice, "behind", false, 0)
	behind.Via = aEP.ID
	f.ok(f.s.UpdateEndpoint(f.ctx, behind))
	f.ok(f.s.CreateToken(f.ctx, &domain.Token{UserID: alice.ID, Kind: domain.TokenAPI, Name: "laptop", Hash: "a1"}))
	f.ok(f.s.AddSSHKey(f.ctx, &domain.SSHKey{UserID: alice.ID, Line: "ssh-ed25519 AAAA", Fingerprint: "SHA256:a"}))
	f.ok(f.s.PutActivation(f.ctx, domain.Activation{UserID: alice.ID, EndpointID: bEP.ID, Sealed: []byte("s"), Expires: t0.Add(time.Hour)}))
	aTask, bTask := f.task(alice, aEP, bEP, t0), f.task(bob, bEP, aEP, t0)
	cancel := func(u domain.User, task domain.Task) {
		t.Helper()
		_, err := f.s.RequestCancel(f.ctx, u.ID, task.ID, t0)
		f.ok(err)
	}
	f.ok(f.s.AddEvents(f.ctx, []domain.Event{{TaskID: aTask.ID, Code: domain.EventStarted, Time: t0}}))
	wantCode(t, f.s.RemoveUser(f.ctx, alice.ID), domain.EConflict) // her task
	cancel(alice, aTask)
	wantCode(t, f.s.RemoveUser(f.ctx, alice.ID), domain.EConflict) // bob's task to her endpoint
	cancel(bob, bTask)
	bVia := f.endpoint(bob, "via", false, 0)
	bVia.Via = aEP.ID
	f.ok(f.s.UpdateEndpoint(f.ctx, bVia))
	wantCode(t, f.s.RemoveUser(f.ctx, alice.ID), domain.EConflict) // her endpoint is bob's head node
	f.ok(f.s.DeleteEndpoint(f.ctx, bVia.ID))

	f.ok(f.s.RemoveUser(f.ctx, alice.ID))
	users, err := f.s.Users(f.ctx)
	f.ok(err)
	equal(t, "Users", users, []domain.User{bob})
	runErrCases(t, []errCase{
		{"user", func() error { _, err := f.s.UserByID(f.ctx, alice.ID); return err }, domain.ENotFound},
		{"token", func() error { _, err := f.s.TokenByHash(f.ctx, "a1"); return err }, domain.ENotFound},
		{"task", func() error { _, err := f.s.TaskByID(f.ctx, aTask.ID); return err }, domain.ENotFound},
		{"endpoint", func() error { _, err := f.s.Endpoint(f.ctx, aEP.ID); return err }, domain.ENotFound},
		{"endpoint behind", func() error { _, err := f.s.Endpoint(f.ctx, behind.ID); return err }, domain.ENotFound},
		{"again", func() error { return f.s.RemoveUser(f.ctx, alice.ID) }, domain.ENotFound},
	})
	if _, err := f.s.TaskByID(f.ctx, bTask.ID); err != nil {
		t.Fatalf("bob's task after alice's removal: %v", err)
	}
	keys, err := f.s.SSHKeys(f.ctx, alice.ID)
	f.ok(err)
	if len(keys) != 0 {
		t.Fatalf("SSH keys of a removed user: %+v", keys)
	}
}
