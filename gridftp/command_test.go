package gridftp_test

import (
	"errors"
	"strings"
	"testing"

	"ferry/gridftp"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line      string
		verb, arg string
		err       error
	}{
		{"NOOP", "NOOP", "", nil},
		{"noop\r\n", "NOOP", "", nil},
		{"NoOp\n", "NOOP", "", nil},
		{"user anonymous", "USER", "anonymous", nil},
		{"STOR my file.txt", "STOR", "my file.txt", nil},
		{"STOR  leading space", "STOR", " leading space", nil},
		{"STOR trailing space ", "STOR", "trailing space ", nil},
		{"RETR ", "RETR", "", nil},
		{"SITE CHMOD 644 /a b", "SITE", "CHMOD 644 /a b", nil},
		{"OPTS RETR Parallelism=4,4,4;", "OPTS", "RETR Parallelism=4,4,4;", nil},
		{"CKSM MD5 0 -1 /p", "CKSM", "MD5 0 -1 /p", nil},
		{"STOR tab\there", "STOR", "tab\there", nil},
		{"STOR \xc3\xa9t\xc3\xa9", "STOR", "\xc3\xa9t\xc3\xa9", nil},
		{"\xff\xf4\xff\xf2ABOR\r\n", "ABOR", "", nil}, // IAC IP IAC DM
		{"\xff\xf4\xf2ABOR", "ABOR", "", nil},
		{"\xf2ABOR", "ABOR", "", nil},
		{"\xff\xf4abor", "ABOR", "", nil},
		{"ABCDEFGH x", "ABCDEFGH", "x", nil},
		{"", "", "", gridftp.ErrBadCommand},
		{"\r\n", "", "", gridftp.ErrBadCommand},
		{" NOOP", "", "", gridftp.ErrBadCommand},
		{"\xff\xf4", "", "", gridftp.ErrBadCommand},
		{"ABCDEFGHI", "", "", gridftp.ErrBadCommand},
		{"ABCDEFGHIJKLMNOP arg", "", "", gridftp.ErrBadCommand},
		{"NO1P", "", "", gridftp.ErrBadCommand},
		{"NO-P", "", "", gridftp.ErrBadCommand},
		{"NOOP\tx", "", "", gridftp.ErrBadCommand},
		{"R\xc3\xa9TR x", "", "", gridftp.ErrBadCommand},
		{"STOR a\x00b", "", "", gridftp.ErrBadCommand},
		{"STOR a\rb", "", "", gridftp.ErrBadCommand},
		{"STOR a\nb", "", "", gridftp.ErrBadCommand},
		{"STOR a\r\r\n", "STOR", "a", nil}, // trailing CRs are line ending
		{"\x00NOOP", "", "", gridftp.ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(strings.ToValidUTF8(tt.line, "?"), func(t *testing.T) {
			got, err := gridftp.ParseCommand(tt.line)
			if !errors.Is(err, tt.err) {
				t.Fatalf("ParseCommand(%q) error %v, want %v", tt.line, err, tt.err)
			}
			if err == nil && (got.Verb != tt.verb || got.Arg != tt.arg) {
				t.Fatalf("ParseCommand(%q) = %q %q, want %q %q", tt.line, got.Verb, got.Arg, tt.verb, tt.arg)
			}
		})
	}
}

func TestCommandString(t *testing.T) {
	tests := []struct {
		c    gridftp.Command
		want string
	}{
		{gridftp.Command{Verb: "NOOP"}, "NOOP"},
		{gridftp.Command{Verb: "STOR", Arg: "a b"}, "STOR a b"},
		{gridftp.Command{Verb: "STOR", Arg: " a"}, "STOR  a"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
		back, err := gridftp.ParseCommand(tt.c.String())
		if err != nil || back != tt.c {
			t.Errorf("ParseCommand(String()) = %#v, %v", back, err)
		}
	}
}
