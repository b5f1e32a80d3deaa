package gss

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestRecordConn: RecordConn stops at the end of each TLS
// record, however large the caller's buffer, so the bytes after the last
// record stay on the connection.
func TestRecordConn(t *testing.T) {
	rec := func(body string) []byte {
		return append([]byte{22, 3, 3, byte(len(body) >> 8), byte(len(body))}, body...)
	}
	tests := []struct {
		name    string
		records [][]byte
		want    []string // what successive large reads return, record by record
	}{
		{"one record", [][]byte{rec("hello")}, []string{"\x16\x03\x03\x00\x05", "hello"}},
		{"empty body", [][]byte{rec(""), rec("x")}, []string{"\x16\x03\x03\x00\x00", "\x16\x03\x03\x00\x01", "x"}},
		{"two records", [][]byte{rec("ab"), rec("cde")}, []string{"\x16\x03\x03\x00\x02", "ab", "\x16\x03\x03\x00\x03", "cde"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tcpPair(t)
			wire := append(bytes.Join(tt.records, nil), "PAYLOAD"...)
			go a.Write(wire)
			r := &RecordConn{Conn: b}
			for i, want := range tt.want {
				got := make([]byte, 0, len(want))
				for len(got) < len(want) {
					buf := make([]byte, 4096)
					n, err := r.Read(buf)
					if err != nil {
						t.Fatalf("read %d: %v", i, err)
					}
					got = append(got, buf[:n]...)
				}
				if string(got) != want {
					t.Fatalf("read %d = %q, want %q", i, got, want)
				}
			}
			rest := make([]byte, 7)
			if _, err := io.ReadFull(b, rest); err != nil || string(rest) != "PAYLOAD" {
				t.Fatalf("after the records: %q, %v", rest, err)
			}
		})
	}
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
