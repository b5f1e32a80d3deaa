package gridftp_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"ferry/gridftp"
)

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"NOOP", "noop\r\n", "STOR my file.txt", "\xff\xf4\xff\xf2ABOR\r\n", "", " ", "SITE CHMOD 644 x",
		"OPTS RETR Parallelism=4,4,4;", "STOR a\x00b", "STOR a\rb", "ABCDEFGHI x", "\xff", "\xff\xff\xff",
		"R\xc3\xa9TR x", "TYPE  ", "REST 0-10,20-30",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := gridftp.ParseCommand(line)
		if err != nil {
			if !errors.Is(err, gridftp.ErrBadCommand) {
				t.Fatalf("error %v does not wrap ErrBadCommand", err)
			}
			return
		}
		if len(c.Verb) == 0 || len(c.Verb) > 8 {
			t.Fatalf("verb %q", c.Verb)
		}
		for _, r := range c.Verb {
			if r < 'A' || r > 'Z' {
				t.Fatalf("verb %q is not upper-case letters", c.Verb)
			}
		}
		if strings.ContainsAny(c.Arg, "\x00\r\n") {
			t.Fatalf("arg %q holds NUL, CR or LF", c.Arg)
		}
		back, err := gridftp.ParseCommand(c.String())
		if err != nil || back != c {
			t.Fatalf("ParseCommand(%q) = %#v, %v; want %#v", c.String(), back, err, c)
		}
	})
}

// sameCodeLine reports whether a reply's middle line would be read as a
// line with the reply's own code, which makes WriteTo's output differ.
func sameCodeLine(code int, line string) bool {
	if len(line) < 3 || (len(line) > 3 && line[3] != ' ' && line[3] != '-') {
		return false
	}
	c, err := strconv.Atoi(line[:3])
	return err == nil && c == code
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		"220 ready\r\n",
		"211-Extensions supported\r\n SIZE\r\n MDTM\r\n211 End.\r\n",
		"550-GlobusError: v=1 c=INTERNAL_ERROR\r\n550-GridFTP-Errno: 5\r\n550 End.\r\n",
		"112-Perf Marker\r\n Timestamp:  1.0\r\n Stripe Bytes Transferred: 1\r\n112 End.\r\n",
		"211-a\r\n213 b\r\n211\r\n",
		"229-Entering Striped Passive Mode.\r\n 127,0,0,1,1,2\r\n229 End\r\n",
		"220 ready", "211-x\r\n", "hello\r\n", "", "2200 x\r\n", "099 x\r\n", "\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReader(bytes.NewReader(in))
		r, err := gridftp.ReadReply(br)
		if err != nil {
			if !errors.Is(err, gridftp.ErrMalformedReply) && !errors.Is(err, gridftp.ErrLineTooLong) &&
				err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.Code < 100 || r.Code > 699 || len(r.Lines) == 0 {
			t.Fatalf("reply %#v", r)
		}
		if len(r.Lines) > gridftp.MaxReplyLines+1 {
			t.Fatalf("reply of %d lines", len(r.Lines))
		}
		for i, l := range r.Lines {
			if strings.ContainsRune(l, '\n') || len(l) > gridftp.MaxLine {
				t.Fatalf("line %d: %q", i, l)
			}
			if i > 0 && i < len(r.Lines)-1 && sameCodeLine(r.Code, l) {
				return // not representable without its prefix
			}
		}
		var b bytes.Buffer
		if _, err := r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		back, err := gridftp.ReadReply(bufio.NewReader(&b))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %#v = %#v, %v", r, back, err)
		}
	})
}

func FuzzParseRanges(f *testing.F) {
	for _, s := range []string{
		"", "0-10", "0-10,20-30", "20-30,0-10", "0-10,10-20", "5-5", "10-5", "a-b", "0-10,", " 0-1 , 2-3 ",
		"0-9223372036854775807", "0-9223372036854775808", "-1-2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := gridftp.ParseRanges(s)
		if err != nil {
			if !errors.Is(err, gridftp.ErrBadRanges) {
				t.Fatalf("error %v does not wrap ErrBadRanges", err)
			}
			return
		}
		list := rs.List()
		var total int64
		for i, r := range list {
			if r.Start < 0 || r.End <= r.Start {
				t.Fatalf("range %d: %v", i, r)
			}
			if i > 0 && list[i-1].End >= r.Start {
				t.Fatalf("ranges %v and %v overlap or touch", list[i-1], r)
			}
			if !rs.Contains(r.Start, r.End) {
				t.Fatalf("Contains(%v) = false", r)
			}
			if m := rs.Missing(r.Start, r.End); len(m) != 0 {
				t.Fatalf("Missing(%v) = %v", r, m)
			}
			total += r.Len()
		}
		if total != rs.Total() {
			t.Fatalf("Total %d, sum %d", rs.Total(), total)
		}
		back, err := gridftp.ParseRanges(rs.String())
		if err != nil || back.String() != rs.String() {
			t.Fatalf("ParseRanges(%q) = %q, %v", rs.String(), back.String(), err)
		}
		if len(list) > 0 {
			lo, hi := list[0].Start, list[len(list)-1].End
			var again gridftp.Ranges
			again.AddAll(rs)
			for _, m := range rs.Missing(lo, hi) {
				again.Add(m.Start, m.End)
			}
			if got := again.List(); len(got) != 1 || got[0] != (gridftp.Range{Start: lo, End: hi}) {
				t.Fatalf("set plus Missing = %v, want %d-%d", got, lo, hi)
			}
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	f.Add(headerBytes(0, 5, 0))
	f.Add(headerBytes(gridftp.DescEOD|gridftp.DescEOF, 0, 4))
	f.Add(headerBytes(gridftp.DescEOF, 1, 1))
	f.Add(headerBytes(0, 1<<63, 0))
	f.Add(headerBytes(0xff, 1<<62, 1<<62))
	f.Add([]byte{})
	f.Add([]byte{0x48, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := gridftp.ReadHeader(bytes.NewReader(in))
		if len(in) < gridftp.HeaderLen {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("ReadHeader of %d bytes: %v", len(in), err)
			}
			return
		}
		h2, err2 := gridftp.ParseHeader(in[:gridftp.HeaderLen])
		if (err == nil) != (err2 == nil) || h != h2 {
			t.Fatalf("ReadHeader %+v, %v; ParseHeader %+v, %v", h, err, h2, err2)
		}
		if err != nil {
			if !errors.Is(err, gridftp.ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if int64(h.Count) < 0 || int64(h.Offset) < 0 || int64(h.Count+h.Offset) < 0 {
			t.Fatalf("header %+v overflows int64", h)
		}
		if h.Desc&gridftp.DescEOF != 0 && (h.Count != 0 || h.Offset > gridftp.MaxStreams) {
			t.Fatalf("EOF header %+v accepted", h)
		}
		var b [gridftp.HeaderLen]byte
		h.Put(b[:])
		if !bytes.Equal(b[:], in[:gridftp.HeaderLen]) {
			t.Fatalf("Put = % x, want % x", b, in[:gridftp.HeaderLen])
		}
	})
}
