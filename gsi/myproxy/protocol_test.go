package myproxy

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRequestEncode(t *testing.T) {
	for _, c := range []struct {
		name string
		r    request
		want string // "" with err
		err  string
	}{
		{"get", request{Command: cmdGet, Username: "alice", Passphrase: "ferry-pass-1", Lifetime: 12 * time.Hour},
			"VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=alice\nPASSPHRASE=ferry-pass-1\nLIFETIME=43200\n\x00", ""},
		{"whole seconds", request{Username: "bob", Passphrase: "p w=d", Lifetime: 90*time.Minute + 1500*time.Millisecond},
			"VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=bob\nPASSPHRASE=p w=d\nLIFETIME=5401\n\x00", ""},
		{"DN as username", request{Username: "/O=Grid/CN=Alice Smith", Passphrase: "x", Lifetime: time.Hour},
			"VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=/O=Grid/CN=Alice Smith\nPASSPHRASE=x\nLIFETIME=3600\n\x00", ""},
		{"empty pass phrase", request{Username: "alice", Lifetime: time.Hour},
			"VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=alice\nPASSPHRASE=\nLIFETIME=3600\n\x00", ""},
		{"no username", request{Passphrase: "x", Lifetime: time.Hour}, "", "no username"},
		{"newline in username", request{Username: "alice\nCOMMAND=1", Lifetime: time.Hour}, "", "newline or NUL"},
		{"NUL in pass phrase", request{Username: "alice", Passphrase: "a\x00b", Lifetime: time.Hour}, "", "pass phrase holds"},
		{"CR in pass phrase", request{Username: "alice", Passphrase: "a\rb", Lifetime: time.Hour}, "", "pass phrase holds"},
		{"short lifetime", request{Username: "alice", Lifetime: time.Millisecond}, "", "less than a second"},
		{"negative lifetime", request{Username: "alice", Lifetime: -time.Hour}, "", "less than a second"},
		{"too long", request{Username: "alice", Passphrase: strings.Repeat("x", 1000), Lifetime: time.Hour}, "", "too long"},
	} {
		got, err := c.r.encode()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestParseResponse(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       *response
		err        string
	}{
		{"ok", "VERSION=MYPROXYv2\nRESPONSE=0\n", &response{Code: 0}, ""},
		{"ok without last newline", "VERSION=MYPROXYv2\nRESPONSE=0", &response{Code: 0}, ""},
		{"bad pass phrase", "VERSION=MYPROXYv2\nRESPONSE=1\nERROR=Bad password\nERROR=invalid credential passphrase\n",
			&response{Code: 1, Errors: []string{"Bad password", "invalid credential passphrase"}}, ""},
		{"error with =", "VERSION=MYPROXYv2\nRESPONSE=1\nERROR=a=b\n", &response{Code: 1, Errors: []string{"a=b"}}, ""},
		{"authorization", "VERSION=MYPROXYv2\nRESPONSE=2\nAUTHORIZATION_DATA=X509_certificate:abc\n",
			&response{Code: 2, AuthMethods: []string{"X509_certificate:abc"}}, ""},
		{"unknown keys ignored", "VERSION=MYPROXYv2\nRESPONSE=0\nCRED_OWNER=/O=Grid/CN=a\nTRUSTED_CERTS=x\n", &response{Code: 0}, ""},
		{"empty", "", nil, "empty response"},
		{"no version", "RESPONSE=0\n", nil, "no VERSION"},
		{"other version", "VERSION=MYPROXYv1\nRESPONSE=0\n", nil, `protocol version "MYPROXYv1"`},
		{"no response", "VERSION=MYPROXYv2\n", nil, "no RESPONSE"},
		{"bad code", "VERSION=MYPROXYv2\nRESPONSE=7\n", nil, "response code"},
		{"code with sign", "VERSION=MYPROXYv2\nRESPONSE=+0\n", nil, "response code"},
		{"two codes", "VERSION=MYPROXYv2\nRESPONSE=0\nRESPONSE=1\n", nil, "two RESPONSE"},
		{"two versions", "VERSION=MYPROXYv2\nVERSION=MYPROXYv2\nRESPONSE=0\n", nil, "two VERSION"},
		{"no =", "VERSION=MYPROXYv2\nRESPONSE=0\ngarbage\n", nil, "no KEY=value"},
		{"NUL inside", "VERSION=MYPROXYv2\nRESPONSE=0\x00\n", nil, "NUL"},
	} {
		got, err := parseResponse([]byte(c.text))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// der is a fake DER SEQUENCE of n content bytes.
func der(n int, fill byte) []byte {
	var h []byte
	switch {
	case n < 0x80:
		h = []byte{0x30, byte(n)}
	case n < 0x100:
		h = []byte{0x30, 0x81, byte(n)}
	default:
		h = []byte{0x30, 0x82, byte(n >> 8), byte(n)}
	}
	return append(h, bytes.Repeat([]byte{fill}, n)...)
}

func TestParseCerts(t *testing.T) {
	a, b, c := der(5, 'a'), der(200, 'b'), der(1500, 'c')
	msg := append(append(append([]byte{3}, a...), b...), c...)
	final := []byte("VERSION=MYPROXYv2\nRESPONSE=0\n\x00")
	for i := 0; i < len(msg); i++ {
		ders, _, complete, err := parseCerts(msg[:i])
		if err != nil || complete || ders != nil {
			t.Fatalf("prefix of %d bytes: %v %v %v", i, len(ders), complete, err)
		}
	}
	ders, rest, complete, err := parseCerts(append(msg, final...))
	if err != nil || !complete || !reflect.DeepEqual(ders, [][]byte{a, b, c}) || !bytes.Equal(rest, final) {
		t.Fatalf("whole: %d certificates, rest %q, %v %v", len(ders), rest, complete, err)
	}
	for _, bad := range []struct {
		name string
		msg  []byte
		err  string
	}{
		{"zero", []byte{0}, "no certificate"},
		{"not a sequence", []byte{1, 0x31, 1, 0}, "not a DER SEQUENCE"},
		{"indefinite", []byte{1, 0x30, 0x80}, "indefinite"},
		{"huge", []byte{1, 0x30, 0x84, 1, 0, 0, 0}, "indefinite or over"},
		{"a response instead", final, "certificate 0 of 86: not a DER SEQUENCE"},
	} {
		if _, _, _, err := parseCerts(bad.msg); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%s: %v, want %q", bad.name, err, bad.err)
		}
	}
}

func TestReadCertsSplitAndError(t *testing.T) {
	a, b := der(300, 'a'), der(20, 'b')
	msg := append(append([]byte{2}, a...), b...)
	final := []byte("VERSION=MYPROXYv2\nRESPONSE=0\n\x00")
	// One byte a read, as records might split it.
	ders, rest, err := readCerts(&oneByteReader{b: append(append([]byte{}, msg...), final...)}, "alice")
	if err != nil || len(ders) != 2 || !bytes.Equal(ders[0], a) || !bytes.Equal(ders[1], b) {
		t.Fatalf("readCerts: %d, %v", len(ders), err)
	}
	text, err := readText(&oneByteReader{b: final[len(rest):]}, rest)
	if err != nil || string(text) != "VERSION=MYPROXYv2\nRESPONSE=0\n" {
		t.Fatalf("final response: %q %v", text, err)
	}
	// The server refusing to sign instead.
	_, _, err = readCerts(&oneByteReader{b: []byte("VERSION=MYPROXYv2\nRESPONSE=1\nERROR=Unable to delegate credentials.\n\x00")}, "alice")
	var se *ServerError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "Unable to delegate credentials.") {
		t.Fatalf("error response: %v", err)
	}
	_, _, err = readCerts(&oneByteReader{b: msg[:100]}, "alice")
	if err == nil || !strings.Contains(err.Error(), "inside its certificates") {
		t.Fatalf("cut: %v", err)
	}
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errEOF
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

func TestServerError(t *testing.T) {
	for _, c := range []struct {
		lines []string
		is    error
		want  string
	}{
		{[]string{"Bad password", "invalid credential passphrase"}, ErrBadPassphrase,
			"MyProxy: bad pass phrase for alice (server: Bad password; invalid credential passphrase)"},
		{[]string{`No credentials exist for username "alice".`}, ErrNoCredentials,
			`MyProxy: no credentials for user alice (server: No credentials exist for username "alice".)`},
		{[]string{"Unable to delegate credentials."}, nil,
			"MyProxy: the server refused to give a credential of alice: Unable to delegate credentials."},
		{nil, nil, "MyProxy: the server refused to give a credential of alice: no reason given"},
	} {
		err := error(newServerError("alice", c.lines))
		if err.Error() != c.want {
			t.Errorf("%q: %q, want %q", c.lines, err, c.want)
		}
		for _, e := range []error{ErrBadPassphrase, ErrNoCredentials} {
			if errors.Is(err, e) != (e == c.is) {
				t.Errorf("%q: errors.Is(%v) = %v", c.lines, e, !(e == c.is))
			}
		}
	}
}

func TestNamesHost(t *testing.T) {
	cn := func(s string) *x509.Certificate { return &x509.Certificate{Subject: pkix.Name{CommonName: s}} }
	san := &x509.Certificate{Subject: pkix.Name{CommonName: "host/a.example.org"},
		DNSNames: []string{"b.example.org"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")}}
	for _, c := range []struct {
		cert *x509.Certificate
		host string
		want bool
	}{
		{cn("host/127.0.0.1"), "127.0.0.1", true},
		{cn("myproxy/127.0.0.1"), "127.0.0.1", true},
		{cn("127.0.0.1"), "127.0.0.1", true},
		{cn("host/MyProxy.Example.org"), "myproxy.example.org", true},
		{cn("host/localhost"), "127.0.0.1", false},
		{cn("ftp/127.0.0.1"), "127.0.0.1", false},
		{cn("host/127.0.0.10"), "127.0.0.1", false},
		{cn(""), "127.0.0.1", false},
		{san, "b.example.org", true},
		{san, "192.0.2.1", true},
		{san, "a.example.org", false}, // with SANs, the CN does not count
		{san, "192.0.2.2", false},
	} {
		if got := namesHost(c.cert, c.host); got != c.want {
			t.Errorf("CN %q SAN %v %v, host %s: %v, want %v", c.cert.Subject.CommonName, c.cert.DNSNames, c.cert.IPAddresses, c.host, got, c.want)
		}
	}
}

func TestSplitAddr(t *testing.T) {
	for _, c := range []struct{ in, host, port, err string }{
		{"myproxy.example.org", "myproxy.example.org", "7512", ""},
		{"myproxy.example.org:7513", "myproxy.example.org", "7513", ""},
		{"127.0.0.1:1", "127.0.0.1", "1", ""},
		{"::1", "::1", "7512", ""},
		{"[::1]:7000", "::1", "7000", ""},
		{"[::1]", "::1", "7512", ""},
		{":7512", "", "", "no host"},
		{"", "", "", "no host"},
	} {
		h, p, err := splitAddr(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || h != c.host || p != c.port {
			t.Errorf("%q: %q %q %v", c.in, h, p, err)
		}
	}
}

func TestUnescapeDN(t *testing.T) {
	if got := unescapeDN(`/O=Grid/CN=host\/a.example.org\+x`); got != "/O=Grid/CN=host/a.example.org+x" {
		t.Errorf("unescapeDN: %q", got)
	}
}
