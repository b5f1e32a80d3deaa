package secret

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"ferry/service/domain"
)

func TestSealOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	b, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	l := domain.Login{User: "alice", Password: "s3cret"}
	sealed, err := b.Seal(l, Context(1, "ep"))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := LoadOrCreate(path) // the same key, read back
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		box     *Box
		sealed  []byte
		context string
		ok      bool
	}{
		{"same key and context", b2, sealed, Context(1, "ep"), true},
		{"another row", b2, sealed, Context(2, "ep"), false},
		{"truncated", b2, sealed[:10], Context(1, "ep"), false},
		{"tampered", b2, append(append([]byte{}, sealed[:len(sealed)-1]...), sealed[len(sealed)-1]^1), Context(1, "ep"), false},
	}
	other, _ := New(make([]byte, KeySize))
	tests = append(tests, struct {
		name    string
		box     *Box
		sealed  []byte
		context string
		ok      bool
	}{"another key", other, sealed, Context(1, "ep"), false})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.box.Open(tc.sealed, tc.context)
			if tc.ok != (err == nil) {
				t.Fatalf("Open: err %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && got != l {
				t.Fatalf("Open = %+v, want %+v", got, l)
			}
		})
	}
	if string(sealed) == "s3cret" || len(sealed) < 28 {
		t.Fatal("sealed value looks unsealed")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("New accepted a short key")
	}
}

func TestSealBytes(t *testing.T) {
	b, _ := New(make([]byte, KeySize))
	sealed, err := b.SealBytes([]byte("the CA"), "ca")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.OpenBytes(sealed, "ca"); err != nil || string(got) != "the CA" {
		t.Fatalf("OpenBytes = %q, %v", got, err)
	}
	if _, err := b.OpenBytes(sealed, "activation:1:ep"); err == nil {
		t.Fatal("opened with another context")
	}
}

// A gsi endpoint's login — a grid proxy — is sealed like a password: the
// sealed value holds none of it, it opens back whole, and a Login
// printed or logged shows no secret.
func TestSealProxy(t *testing.T) {
	b, _ := New(make([]byte, KeySize))
	const proxy = "-----BEGIN CERTIFICATE-----\nMIIproxy\n-----END CERTIFICATE-----\n" +
		"-----BEGIN PRIVATE KEY-----\nMIIkeyMaterial\n-----END PRIVATE KEY-----\n"
	l := domain.Login{User: "alice", Proxy: proxy}
	sealed, err := b.Seal(l, Context(1, "ep"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("keyMaterial")) || bytes.Contains(sealed, []byte("PRIVATE")) {
		t.Fatal("the sealed value holds the proxy")
	}
	got, err := b.Open(sealed, Context(1, "ep"))
	if err != nil || got != l {
		t.Fatalf("Open = %+v, %v; want %+v", got, err, l)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("login", "login", l)
	for _, shown := range []string{fmt.Sprint(l), fmt.Sprintf("%v %s", l, l), logged.String()} {
		if strings.Contains(shown, "keyMaterial") || strings.Contains(shown, "PRIVATE") {
			t.Errorf("a printed login shows the proxy: %s", shown)
		}
	}
	if s := (domain.Login{User: "bob", Password: "pw-secret"}).String(); strings.Contains(s, "pw-secret") {
		t.Errorf("a printed login shows the password: %s", s)
	}
}
