package gridftp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"

	"ferry/gridftp"
)

func headerBytes(desc byte, count, offset uint64) []byte {
	b := make([]byte, gridftp.HeaderLen)
	b[0] = desc
	binary.BigEndian.PutUint64(b[1:9], count)
	binary.BigEndian.PutUint64(b[9:17], offset)
	return b
}

func TestHeaderPut(t *testing.T) {
	h := gridftp.Header{Desc: gridftp.DescEOD | gridftp.DescEOF, Count: 0, Offset: 4}
	var b [gridftp.HeaderLen]byte
	h.Put(b[:])
	want := []byte{0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("Put = % x, want % x", b, want)
	}
	h = gridftp.Header{Count: 0x0102030405060708, Offset: 0x1112131415161718}
	h.Put(b[:])
	want = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("Put = % x, want % x", b, want)
	}
}

func TestParseHeader(t *testing.T) {
	max := uint64(math.MaxInt64)
	tests := []struct {
		name          string
		desc          byte
		count, offset uint64
		ok            bool
	}{
		{"data block", 0, 262144, 1 << 30, true},
		{"empty data block", 0, 0, 0, true},
		{"EOD", gridftp.DescEOD, 0, 0, true},
		{"EOF with EOD count", gridftp.DescEOF | gridftp.DescEOD, 0, 4, true},
		{"EOF at MaxStreams", gridftp.DescEOF, 0, gridftp.MaxStreams, true},
		{"EOF over MaxStreams", gridftp.DescEOF, 0, gridftp.MaxStreams + 1, false},
		{"EOF with payload", gridftp.DescEOF | gridftp.DescEOD, 10, 1, false},
		{"will close", gridftp.DescWillClose | gridftp.DescEOD, 0, 0, true},
		{"unused bits", gridftp.DescEOR | gridftp.DescErrors | gridftp.DescRestart, 1, 1, true},
		{"count at max", 0, max, 0, true},
		{"offset at max", 0, 0, max, true},
		{"count over max", 0, max + 1, 0, false},
		{"offset over max", 0, 0, max + 1, false},
		{"sum over max", 0, max / 2, max/2 + 2, false},
		{"sum at max", 0, max / 2, max/2 + 1, true},
		{"all ones", 0xff, math.MaxUint64, math.MaxUint64, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := headerBytes(tt.desc, tt.count, tt.offset)
			h, err := gridftp.ParseHeader(b)
			if tt.ok != (err == nil) {
				t.Fatalf("ParseHeader(% x) error %v, want ok=%v", b, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, gridftp.ErrBadHeader) {
					t.Fatalf("error %v does not wrap ErrBadHeader", err)
				}
				return
			}
			if h.Desc != tt.desc || h.Count != tt.count || h.Offset != tt.offset {
				t.Fatalf("ParseHeader = %+v", h)
			}
			var back [gridftp.HeaderLen]byte
			h.Put(back[:])
			if !bytes.Equal(back[:], b) {
				t.Fatalf("Put(ParseHeader(b)) = % x, want % x", back, b)
			}
		})
	}
}

func TestReadHeader(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(headerBytes(0, 5, 100))
	stream.WriteString("hello")
	stream.Write(headerBytes(gridftp.DescEOD|gridftp.DescEOF, 0, 1))
	h, err := gridftp.ReadHeader(&stream)
	if err != nil || h != (gridftp.Header{Count: 5, Offset: 100}) {
		t.Fatalf("first header %+v, %v", h, err)
	}
	payload := make([]byte, h.Count)
	io.ReadFull(&stream, payload)
	h, err = gridftp.ReadHeader(&stream)
	if err != nil || h != (gridftp.Header{Desc: 0x48, Offset: 1}) {
		t.Fatalf("EOF header %+v, %v", h, err)
	}
	if _, err := gridftp.ReadHeader(&stream); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
	if _, err := gridftp.ReadHeader(bytes.NewReader(headerBytes(0, 1, 1)[:9])); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := gridftp.ReadHeader(bytes.NewReader(headerBytes(gridftp.DescEOF, 3, 1))); !errors.Is(err, gridftp.ErrBadHeader) {
		t.Fatalf("EOF with payload: %v", err)
	}
}
