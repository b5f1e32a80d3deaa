package gridops_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"ferry/internal/netpolicy"
	"ferry/internal/peertest"
	"ferry/service/domain"
	"ferry/service/gridops"
)

// TestNetworkPolicy: the service reaches an endpoint's servers only at
// the addresses its policy allows, whatever the URL names: an address, or
// a name that resolves to one.
func TestNetworkPolicy(t *testing.T) {
	srv, _ := startServer(t)
	u, _ := url.Parse(srv)
	byName := "ftp://localhost:" + u.Port()
	local, err := netpolicy.New("", true)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := netpolicy.New("", false)
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := netpolicy.New("10.0.0.0/8", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		nets   *netpolicy.Policy
		server string
		want   string // error code; "" for success
		why    string // what the refusal says
	}{
		{"loopback, the service on loopback", local, srv, "", ""},
		{"a name for loopback, the service on loopback", local, byName, "", ""},
		{"loopback, the service elsewhere", remote, srv, domain.EForbidden, "loopback"},
		{"a name for loopback, the service elsewhere", remote, byName, domain.EForbidden, "loopback"},
		{"cloud metadata", local, "ftp://169.254.169.254:80", domain.EForbidden, "link-local"},
		{"cloud metadata, IPv4 in IPv6", local, "ftp://[::ffff:169.254.169.254]:80", domain.EForbidden, "link-local"},
		{"unspecified: this host", local, "ftp://0.0.0.0:" + u.Port(), domain.EForbidden, "unspecified"},
		{"outside the operator's networks", narrow, srv, domain.EForbidden, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := &gridops.Ops{Timeout: time.Minute, Networks: tc.nets}
			ep := domain.Endpoint{Owner: "o", Name: "ep", Servers: []string{tc.server}, Auth: domain.AuthAnonymous}
			start := time.Now()
			_, err := list(t.Context(), ops, ep, domain.Login{}, "/")
			if got := code(err); got != tc.want || !strings.Contains(domain.ErrorMessage(err), tc.why) {
				t.Fatalf("List = %v (code %q), want code %q saying %q", err, got, tc.want, tc.why)
			}
			if err != nil && time.Since(start) > 30*time.Second { // refused, not dialled until the timeout
				t.Errorf("the refusal took %v", time.Since(start))
			}
		})
	}
}

// secret is in everything the peers below say: no error may hold it.
const secret = "INTERNAL-SECRET-7f3a"

// peerURL is the ftp URL of a server that is not a GridFTP server.
func peerURL(t *testing.T, greet, answer string) string {
	return "ftp://" + peertest.Serve(t, greet, answer)
}

// TestPeerWordsNotRepeated: an endpoint whose server is an SSH, SMTP or
// HTTP server answers every operation with an error that says what kind
// of answer it was, and never what the peer said.
func TestPeerWordsNotRepeated(t *testing.T) {
	good, _ := startServer(t)
	peers := map[string]string{
		"ssh":                 peerURL(t, "SSH-2.0-OpenSSH_9.6 "+secret+"\r\n", ""),
		"smtp":                peerURL(t, "220 mail."+secret+" ESMTP Postfix\r\n", "502 5.5.2 "+secret+": command not recognized\r\n"),
		"http":                peerURL(t, "HTTP/1.1 400 Bad Request\r\nServer: "+secret+"\r\n\r\n", ""),
		"ftp without a login": peerURL(t, "220 "+secret+" FTP\r\n", "421 "+secret+" is closing\r\n"),
	}
	ops := &gridops.Ops{Timeout: 2 * time.Second}
	ctx := context.Background()
	for name, server := range peers {
		t.Run(name, func(t *testing.T) {
			ep := domain.Endpoint{Owner: "o", Name: "ep", Servers: []string{server}, Auth: domain.AuthPassword}
			ok := domain.Endpoint{Owner: "o", Name: "ok", Servers: []string{good}, Auth: domain.AuthAnonymous}
			items := []domain.Item{{Src: "/a", Dst: "/b"}}
			for op, err := range map[string]error{
				"check":          ops.Check(ctx, ep, alice),
				"list":           func() error { _, err := list(ctx, ops, ep, alice, "/"); return err }(),
				"mkdir":          ops.Mkdir(ctx, ep, alice, "/d"),
				"delete":         ops.Delete(ctx, ep, alice, "/d", true, nil),
				"transfer":       ops.CheckTransfer(ctx, ep, ok, alice, domain.Login{}, items, domain.Options{}),
				"transfer to it": ops.CheckTransfer(ctx, ok, ep, domain.Login{}, alice, items, domain.Options{}),
			} {
				if err == nil {
					t.Errorf("%s: no error", op)
					continue
				}
				if msg := domain.ErrorMessage(err) + " / " + err.Error(); strings.Contains(msg, secret) {
					t.Errorf("%s: the error repeats what the peer said: %s", op, msg)
				}
				t.Logf("%s: %s", op, domain.ErrorMessage(err))
			}
		})
	}
}
