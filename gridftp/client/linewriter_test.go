package client

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLineWriter(t *testing.T) {
	type write struct {
		off  int64
		data string
	}
	tests := []struct {
		name    string
		writes  []write
		want    []string
		wantErr error
	}{
		{"in order", []write{{0, "a\r\nb"}, {4, "c\n"}}, []string{"a", "bc"}, nil},
		{"no last line end", []write{{0, "a\nb"}}, []string{"a", "b"}, nil},
		{"out of order", []write{{3, "c\nd\n"}, {0, "a\nb"}}, []string{"a", "bc", "d"}, nil},
		{"sent again", []write{{0, "a\nb\n"}, {0, "a\nb\n"}, {2, "b\nc\n"}}, []string{"a", "b", "c"}, nil},
		{"empty lines", []write{{0, "\n\r\na\n"}}, []string{"a"}, nil},
		{"gap", []write{{0, "a\n"}, {5, "b\n"}}, []string{"a"}, errGap},
		{"line too long", []write{{0, strings.Repeat("x", maxLine+1)}}, nil, errLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			w := &lineWriter{line: func(s string) error { got = append(got, s); return nil }}
			var err error
			for _, wr := range tt.writes {
				if _, err = w.WriteAt([]byte(wr.data), wr.off); err != nil {
					break
				}
			}
			if err == nil {
				err = w.flush()
			}
			if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
				t.Errorf("lines %q, err %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestLineWriterStops(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	w := &lineWriter{line: func(string) error { n++; return stop }}
	if _, err := w.WriteAt([]byte("a\nb\n"), 0); !errors.Is(err, stop) {
		t.Fatalf("WriteAt = %v, want %v", err, stop)
	}
	if _, err := w.WriteAt([]byte("c\n"), 4); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("WriteAt after a stop = %v with %d lines, want %v after 1", err, n, stop)
	}
}
