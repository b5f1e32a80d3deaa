package main

import (
	"bytes"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ferry/connect/ca"
	"ferry/connect/tunnel"
	"ferry/service/secret"
	"ferry/service/sqlstore"
)

// The connect CA lives in the store: a CA an earlier version kept under
// --data moves in, processes with other data directories get the same CA,
// and one with another --key-file is refused.
func TestServiceCA(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, _ := secret.New(bytes.Repeat([]byte{1}, secret.KeySize))
	log := slog.New(slog.DiscardHandler)

	// The CA files of an earlier version.
	old, _ := ca.Generate()
	certBlock, keyPEM := pem.Decode(old.PEM())
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, ca.CertFile), pem.EncodeToMemory(certBlock), 0o644)
	os.WriteFile(filepath.Join(data, ca.KeyFile), keyPEM, 0o600)

	first, err := serviceCA(t.Context(), st, box, data, log)
	if err != nil {
		t.Fatal(err)
	}
	if first.Pin() != old.Pin() {
		t.Fatal("the CA under --data did not move into the store: its agents would have to pair again")
	}
	second, err := serviceCA(t.Context(), st, box, t.TempDir(), log)
	if err != nil || second.Pin() != first.Pin() {
		t.Fatalf("a process with another --data: %v; same CA: %v", err, err == nil && second.Pin() == first.Pin())
	}
	other, _ := secret.New(bytes.Repeat([]byte{2}, secret.KeySize))
	if _, err := serviceCA(t.Context(), st, other, t.TempDir(), log); err == nil || !strings.Contains(err.Error(), "--key-file") {
		t.Fatalf("a process with another key: %v", err)
	}
}

// Where the relay is reached, and what its passive listeners announce, as
// the flags say.
func TestRelayFlags(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _ := ca.Generate()
	for _, tc := range []struct {
		name   string
		api    string // the API's listen address
		flags  relayFlags
		url    string // "PORT" stands for --relay-listen's port
		public string // "": none
		err    string
	}{
		{"the API's port", "127.0.0.1:0", relayFlags{}, "http://service.example/api/v0.10/relay", "127.0.0.1", ""},
		{"the API on every address", "0.0.0.0:0", relayFlags{}, "http://service.example/api/v0.10/relay", "", ""},
		{"behind NAT", "127.0.0.1:0", relayFlags{address: "203.0.113.5"}, "http://service.example/api/v0.10/relay", "203.0.113.5", ""},
		{"a port of its own", "127.0.0.1:0", relayFlags{listen: "127.0.0.1:0"}, "tcp://127.0.0.1:PORT", "127.0.0.1", ""},
		{"its own port behind NAT", "127.0.0.1:0", relayFlags{listen: "127.0.0.1:0", address: "203.0.113.5"}, "tcp://203.0.113.5:PORT", "203.0.113.5", ""},
		{"its own port forwarded", "127.0.0.1:0", relayFlags{listen: "127.0.0.1:0", address: "203.0.113.5:9000"}, "tcp://203.0.113.5:9000", "203.0.113.5", ""},
		{"IPv6", "127.0.0.1:0", relayFlags{address: "2001:db8::1"}, "", "", "--relay-address"},
		{"unspecified", "127.0.0.1:0", relayFlags{address: "0.0.0.0"}, "", "", "--relay-address"},
		{"taken port", "127.0.0.1:0", relayFlags{listen: "API"}, "", "", "--relay-listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiLn, err := net.Listen("tcp", tc.api)
			if err != nil {
				t.Fatal(err)
			}
			defer apiLn.Close()
			if tc.flags.listen == "API" {
				tc.flags.listen = apiLn.Addr().String()
			}
			r, url, err := tc.flags.start(st, c, "p", apiLn, "http://service.example/", slog.New(slog.DiscardHandler), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if strings.Contains(tc.url, "PORT") {
				_, port, _ := strings.Cut(strings.TrimPrefix(url, "tcp://"), ":")
				tc.url = strings.Replace(tc.url, "PORT", port, 1)
				if d, err := (tunnel.Dialer{}).Dial(t.Context(), "tcp://127.0.0.1:"+port); err != nil {
					t.Fatalf("nothing listens on the relay's port: %v", err)
				} else {
					d.Close()
				}
			}
			public := ""
			if r.Public.IsValid() {
				public = r.Public.String()
			}
			if url != tc.url || public != tc.public {
				t.Fatalf("relay at %s announcing %q; want %s and %q", url, public, tc.url, tc.public)
			}
		})
	}
}
