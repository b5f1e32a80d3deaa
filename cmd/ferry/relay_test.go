package main

import (
	"bytes"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ferry/service/ca"
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
