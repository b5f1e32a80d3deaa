package gridftp

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// xor stands in for a security context: it is its own inverse.
func xor(b []byte) ([]byte, error) {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = c ^ 0x5a
	}
	return out, nil
}

func TestProtectedRoundTrip(t *testing.T) {
	line, err := SealCommand("USER :globus-mapping:", xor)
	if err != nil || !strings.HasPrefix(line, "ENC ") || strings.Contains(line, "globus") {
		t.Fatalf("SealCommand: %q, %v", line, err)
	}
	inner, ok, err := OpenCommand(line, xor)
	if err != nil || !ok || inner != "USER :globus-mapping:" {
		t.Fatalf("OpenCommand: %q, %v, %v", inner, ok, err)
	}
	if _, ok, _ := OpenCommand("PWD", xor); ok {
		t.Error("a clear command read as protected")
	}
	for _, bad := range []string{"ENC !!!", "MIC " + "ZGVhZA=="} {
		if _, _, err := OpenCommand(bad, func([]byte) ([]byte, error) { return nil, errors.New("no") }); !errors.Is(err, ErrProtection) {
			t.Errorf("OpenCommand(%q): %v", bad, err)
		}
	}
	two, _ := xor([]byte("PWD\r\nQUIT\r\n"))
	if _, _, err := OpenCommand("ENC "+b64(two), xor); !errors.Is(err, ErrProtection) {
		t.Errorf("two commands in one token: %v", err)
	}

	for _, r := range []Reply{
		{Code: 230, Lines: []string{"User alice logged in."}},
		{Code: 211, Lines: []string{"Features:", " MDTM", " SIZE", "End."}},
	} {
		sealed, err := SealReply(r, xor)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(sealed), "\r\n"), "\r\n")
		for i, l := range lines {
			want := "632-"
			if i == len(lines)-1 {
				want = "632 "
			}
			if !strings.HasPrefix(l, want) {
				t.Errorf("line %d of %d: %q", i, len(lines), l)
			}
		}
		got, err := ReadReply(bufio.NewReader(&OpenReplies{R: bufio.NewReader(bytes.NewReader(sealed)), Unwrap: xor}))
		if err != nil || got.String() != r.String() {
			t.Errorf("round trip: %q, %v; want %q", got.String(), err, r.String())
		}
	}
	if _, err := ReadReply(bufio.NewReader(&OpenReplies{R: bufio.NewReader(strings.NewReader("230 clear\r\n")), Unwrap: xor})); !errors.Is(err, ErrProtection) {
		t.Errorf("a clear reply: %v", err)
	}
}

func b64(b []byte) string {
	line, _ := SealCommand("", func([]byte) ([]byte, error) { return b, nil })
	return strings.TrimPrefix(line, "ENC ")
}

// FuzzProtected: hostile protected lines fail cleanly, both ways.
func FuzzProtected(f *testing.F) {
	f.Add("ENC AAAA")
	f.Add("632 ////")
	f.Add("632-Zm9v\r\n632 YmFy")
	f.Fuzz(func(t *testing.T, s string) {
		OpenCommand(s, xor)
		r := &OpenReplies{R: bufio.NewReader(strings.NewReader(s + "\r\n")), Unwrap: xor}
		ReadReply(bufio.NewReader(r))
	})
}
