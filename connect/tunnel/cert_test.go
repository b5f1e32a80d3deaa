package tunnel

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

// An agent's subject reads back as written; no other subject reads as an
// agent's.
func TestParseAgent(t *testing.T) {
	for _, c := range []struct {
		name    string
		subject pkix.Name
		id      string
		gen     int64
		ok      bool
	}{
		{"agent", AgentSubject("ep-1", 3), "ep-1", 3, true},
		{"generation 0", AgentSubject("ep-2", 0), "ep-2", 0, true},
		{"no endpoint", AgentSubject("", 3), "", 0, false},
		{"relay", pkix.Name{CommonName: RelayName}, "", 0, false},
		{"process", pkix.Name{CommonName: "host:42", OrganizationalUnit: []string{"ferry-process"}}, "", 0, false},
		{"not a number", pkix.Name{CommonName: "ep-1", SerialNumber: "x"}, "", 0, false},
	} {
		id, gen, err := ParseAgent(&x509.Certificate{Subject: c.subject})
		if id != c.id || gen != c.gen || (err == nil) != c.ok {
			t.Errorf("%s: ParseAgent = %q, %d, %v; want %q, %d, ok %v", c.name, id, gen, err, c.id, c.gen, c.ok)
		}
	}
}
