package myproxy

import (
	"bytes"
	"io"
	"testing"
)

var errEOF = io.EOF

// FuzzParseResponse: the parser of the server's text never panics, and
// what it accepts has a code of 0..2 and a line per ERROR.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"VERSION=MYPROXYv2\nRESPONSE=0\n",
		"VERSION=MYPROXYv2\nRESPONSE=1\nERROR=Bad password\nERROR=invalid credential passphrase\n",
		"VERSION=MYPROXYv2\nRESPONSE=2\nAUTHORIZATION_DATA=X509_certificate:x\n",
		"VERSION=MYPROXYv2\nRESPONSE=1\n",
		"RESPONSE=0\nVERSION=MYPROXYv2",
		"=\n=\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseResponse(b)
		if err != nil {
			return
		}
		if r.Code < respOK || r.Code > respAuthorize {
			t.Fatalf("code %d accepted", r.Code)
		}
		if n := bytes.Count(b, []byte("ERROR=")); len(r.Errors) > n {
			t.Fatalf("%d errors from %d ERROR=", len(r.Errors), n)
		}
		if !bytes.Contains(b, []byte("VERSION="+protocolVersion)) {
			t.Fatalf("accepted without VERSION=%s", protocolVersion)
		}
	})
}

// FuzzParseCerts: the parser of the certificates message never panics
// and what it returns lies inside its input.
func FuzzParseCerts(f *testing.F) {
	f.Add([]byte{1, 0x30, 3, 1, 2, 3})
	f.Add([]byte{2, 0x30, 0x81, 0x80})
	f.Add([]byte{1, 0x30, 0x82, 0, 4, 1, 2, 3, 4, 'V'})
	f.Fuzz(func(t *testing.T, b []byte) {
		ders, rest, complete, err := parseCerts(b)
		if err != nil || !complete {
			return
		}
		n := 1 + len(rest)
		for _, d := range ders {
			n += len(d)
		}
		if n != len(b) || len(ders) != int(b[0]) {
			t.Fatalf("%d certificates and %d bytes left of %d bytes", len(ders), len(rest), len(b))
		}
	})
}
