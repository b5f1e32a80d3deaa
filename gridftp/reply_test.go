package gridftp_test

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"ferry/gridftp"
)

func readReplyString(s string) (gridftp.Reply, error) {
	return gridftp.ReadReply(bufio.NewReader(strings.NewReader(s)))
}

func TestReadReply(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want gridftp.Reply
	}{
		{"single", "220 host GridFTP Server 13.24 ready.\r\n",
			gridftp.Reply{Code: 220, Lines: []string{"host GridFTP Server 13.24 ready."}}},
		{"LF only", "200 Type set to I.\n",
			gridftp.Reply{Code: 200, Lines: []string{"Type set to I."}}},
		{"bare code", "200\r\n", gridftp.Reply{Code: 200, Lines: []string{""}}},
		{"code and space", "200 \r\n", gridftp.Reply{Code: 200, Lines: []string{""}}},
		{"RFC 959 dashed", "214-The following commands are recognized:\r\n214-  USER PASS\r\n214 End\r\n",
			gridftp.Reply{Code: 214, Lines: []string{"The following commands are recognized:", "  USER PASS", "End"}}},
		{"GCT GlobusError", "550-GlobusError: v=1 c=INTERNAL_ERROR\r\n" +
			"550-GridFTP-Errno: 5\r\n" +
			"550-GridFTP-Reason: System error in open\r\n" +
			"550-GridFTP-Error-String: Input/output error\r\n" +
			"550 End.\r\n",
			gridftp.Reply{Code: 550, Lines: []string{
				"GlobusError: v=1 c=INTERNAL_ERROR",
				"GridFTP-Errno: 5",
				"GridFTP-Reason: System error in open",
				"GridFTP-Error-String: Input/output error",
				"End."}}},
		{"RFC 2389 FEAT", "211-Extensions supported\r\n" +
			" CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;\r\n" +
			" DCSC P,D\r\n" +
			" MLST Type*;Size*;Modify*;Perm*;Charset;UNIX.mode*;\r\n" +
			" PASV AllowDelayed;\r\n" +
			"211 End.\r\n",
			gridftp.Reply{Code: 211, Lines: []string{
				"Extensions supported",
				" CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;",
				" DCSC P,D",
				" MLST Type*;Size*;Modify*;Perm*;Charset;UNIX.mode*;",
				" PASV AllowDelayed;",
				"End."}}},
		{"SPAS", "229-Entering Striped Passive Mode.\r\n 127,0,0,1,163,187\r\n 127,0,0,1,163,188\r\n229 End\r\n",
			gridftp.Reply{Code: 229, Lines: []string{"Entering Striped Passive Mode.", " 127,0,0,1,163,187", " 127,0,0,1,163,188", "End"}}},
		{"perf marker", "112-Perf Marker\r\n Timestamp:  1700000000.1\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 42\r\n Total Stripe Count: 1\r\n112 End.\r\n",
			gridftp.Reply{Code: 112, Lines: []string{"Perf Marker", " Timestamp:  1700000000.1", " Stripe Index: 0", " Stripe Bytes Transferred: 42", " Total Stripe Count: 1", "End."}}},
		{"other code inside is text", "211-Status\r\n213 not the end\r\n211 End\r\n",
			gridftp.Reply{Code: 211, Lines: []string{"Status", "213 not the end", "End"}}},
		{"empty middle line", "211-a\r\n\r\n211 b\r\n",
			gridftp.Reply{Code: 211, Lines: []string{"a", "", "b"}}},
		{"ends with bare code", "250-status\r\n fact\r\n250\r\n",
			gridftp.Reply{Code: 250, Lines: []string{"status", " fact", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tt.in + "200 next\r\n"))
			got, err := gridftp.ReadReply(br)
			if err != nil {
				t.Fatalf("ReadReply: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ReadReply = %#v, want %#v", got, tt.want)
			}
			// The reader stops at the end of the reply.
			next, err := gridftp.ReadReply(br)
			if err != nil || next.Code != 200 || next.Text() != "next" {
				t.Fatalf("next reply = %v, %v; want 200 next", next, err)
			}
		})
	}
}

func TestReadReplyErrors(t *testing.T) {
	long := strings.Repeat("x", gridftp.MaxLine+10)
	var tooMany strings.Builder
	tooMany.WriteString("211-start\r\n")
	for range gridftp.MaxReplyLines + 5 {
		tooMany.WriteString(" line\r\n")
	}
	tooMany.WriteString("211 End\r\n")
	var tooManyDashed strings.Builder
	tooManyDashed.WriteString("550-start\r\n")
	for range gridftp.MaxReplyLines + 5 {
		tooManyDashed.WriteString("550-line\r\n")
	}
	tooManyDashed.WriteString("550 End\r\n")
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", io.EOF},
		{"no line end", "220 ready", io.ErrUnexpectedEOF},
		{"truncated multi-line", "211-Extensions supported\r\n SIZE\r\n", io.ErrUnexpectedEOF},
		{"truncated last line", "211-Extensions supported\r\n SIZE\r\n211 En", io.ErrUnexpectedEOF},
		{"no code", "hello\r\n", gridftp.ErrMalformedReply},
		{"short", "22\r\n", gridftp.ErrMalformedReply},
		{"code too small", "099 x\r\n", gridftp.ErrMalformedReply},
		{"code too big", "700 x\r\n", gridftp.ErrMalformedReply},
		{"four digits", "2200 x\r\n", gridftp.ErrMalformedReply},
		{"signed", "+20 x\r\n", gridftp.ErrMalformedReply},
		{"bad separator", "220:x\r\n", gridftp.ErrMalformedReply},
		{"over-long line", "220 " + long + "\r\n", gridftp.ErrLineTooLong},
		{"over-long middle line", "211-a\r\n " + long + "\r\n211 End\r\n", gridftp.ErrLineTooLong},
		{"over-long without line end", "220 " + long, gridftp.ErrLineTooLong},
		{"too many text lines", tooMany.String(), gridftp.ErrMalformedReply},
		// A hostile peer repeating "550-" lines must be bounded as well.
		{"too many dashed lines", tooManyDashed.String(), gridftp.ErrMalformedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readReplyString(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadReply = %d lines, %v; want error %v", len(got.Lines), err, tt.want)
			}
		})
	}
}

func TestReadReplyMaxLine(t *testing.T) {
	// A line of exactly MaxLine bytes, line end included, is accepted.
	text := strings.Repeat("y", gridftp.MaxLine-6)
	r, err := readReplyString("220 " + text + "\r\n")
	if err != nil || r.Text() != text {
		t.Fatalf("ReadReply at MaxLine: %v", err)
	}
	_, err = readReplyString("220 " + text + "z\r\n")
	if !errors.Is(err, gridftp.ErrLineTooLong) {
		t.Fatalf("ReadReply at MaxLine+1: %v, want ErrLineTooLong", err)
	}
}

func TestReplyWriteTo(t *testing.T) {
	tests := []struct {
		name  string
		reply gridftp.Reply
		wire  string
	}{
		{"no lines", gridftp.Reply{Code: 200}, "200 \r\n"},
		{"one line", gridftp.Reply{Code: 226, Lines: []string{"Transfer Complete."}}, "226 Transfer Complete.\r\n"},
		{"two lines", gridftp.Reply{Code: 211, Lines: []string{"Extensions supported", "End."}},
			"211-Extensions supported\r\n211 End.\r\n"},
		{"RFC 2389", gridftp.Reply{Code: 211, Lines: []string{"Extensions supported", " SIZE", " MDTM", "End."}},
			"211-Extensions supported\r\n SIZE\r\n MDTM\r\n211 End.\r\n"},
		{"GlobusError", gridftp.Reply{Code: 550, Lines: []string{"GlobusError: v=1 c=PATH_NOT_FOUND", "550-GridFTP-Errno: 2", "End."}},
			"550-GlobusError: v=1 c=PATH_NOT_FOUND\r\n550-GridFTP-Errno: 2\r\n550 End.\r\n"},
		{"preliminary", gridftp.Reply{Code: 111, Lines: []string{"Range Marker 0-10"}}, "111 Range Marker 0-10\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			n, err := tt.reply.WriteTo(&b)
			if err != nil || b.String() != tt.wire || n != int64(len(tt.wire)) {
				t.Fatalf("WriteTo = %q, %d, %v; want %q", b.String(), n, err, tt.wire)
			}
			if s := tt.reply.String(); s != strings.TrimSuffix(tt.wire, "\r\n") {
				t.Fatalf("String = %q", s)
			}
			got, err := readReplyString(b.String())
			if err != nil {
				t.Fatalf("ReadReply: %v", err)
			}
			if got.Code != tt.reply.Code {
				t.Fatalf("code %d, want %d", got.Code, tt.reply.Code)
			}
			if len(tt.reply.Lines) > 0 && got.Lines[0] != tt.reply.Lines[0] {
				t.Fatalf("first line %q, want %q", got.Lines[0], tt.reply.Lines[0])
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	replies := []gridftp.Reply{
		{Code: 220, Lines: []string{"ferry GridFTP Server ready."}},
		{Code: 211, Lines: []string{"Extensions supported", " CKSM MD5:10;", " DCAU", " MLST Type*;Size*;", "End."}},
		{Code: 229, Lines: []string{"Entering Striped Passive Mode.", " 127,0,0,1,1,2", "End"}},
		{Code: 250, Lines: []string{"status of /f", " Type=file;Size=3; /f", "End."}},
		{Code: 550, Lines: []string{"GlobusError: v=1 c=INTERNAL_ERROR", "GridFTP-Errno: 5", "End."}},
		{Code: 226, Lines: []string{""}},
	}
	for _, want := range replies {
		t.Run(want.String(), func(t *testing.T) {
			var b strings.Builder
			want.WriteTo(&b)
			got, err := readReplyString(b.String())
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip = %#v, %v; want %#v", got, err, want)
			}
		})
	}
}

func TestReplyClasses(t *testing.T) {
	tests := []struct {
		code                  int
		preliminary, positive bool
		temporary             bool
	}{
		{111, true, false, false},
		{150, true, false, false},
		{200, false, true, false},
		{350, false, true, false},
		{421, false, false, true},
		{451, false, false, true},
		{550, false, false, false},
	}
	for _, tt := range tests {
		r := gridftp.Reply{Code: tt.code, Lines: []string{"x", "y"}}
		if r.Preliminary() != tt.preliminary || r.Positive() != tt.positive {
			t.Errorf("%d: Preliminary %v Positive %v", tt.code, r.Preliminary(), r.Positive())
		}
		e := &gridftp.Error{Reply: r}
		if e.Temporary() != tt.temporary {
			t.Errorf("%d: Temporary %v", tt.code, e.Temporary())
		}
		if want := "x / y"; !strings.Contains(e.Error(), want) {
			t.Errorf("%d: Error() = %q", tt.code, e.Error())
		}
	}
	if got := (gridftp.Reply{Code: 211, Lines: []string{"a", "b"}}).Text(); got != "a\nb" {
		t.Errorf("Text = %q", got)
	}
}

func TestReadLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("NOOP\r\nSTOR a b\nQUIT"), 16)
	for _, want := range []string{"NOOP", "STOR a b"} {
		got, err := gridftp.ReadLine(br)
		if err != nil || got != want {
			t.Fatalf("ReadLine = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := gridftp.ReadLine(br); err != io.ErrUnexpectedEOF {
		t.Fatalf("ReadLine at unterminated end: %v", err)
	}
	// Lines longer than the bufio buffer are assembled.
	long := strings.Repeat("a", 5000)
	br = bufio.NewReaderSize(strings.NewReader("SITE "+long+"\r\n"), 16)
	if got, err := gridftp.ReadLine(br); err != nil || got != "SITE "+long {
		t.Fatalf("long line: %d bytes, %v", len(got), err)
	}
}
