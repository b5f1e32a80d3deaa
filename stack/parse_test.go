package stack

import (
	"errors"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []Entry
		bad  bool
	}{
		{in: "file", want: []Entry{{Name: "file"}}},
		{in: "file:", want: []Entry{{Name: "file"}}},
		{in: "popen:argv=#tar#cf#-#-C#/data/src#dir", want: []Entry{{Name: "popen", Opts: []Option{{"argv", "#tar#cf#-#-C#/data/src#dir"}}}}},
		{in: "popen:argv=#tar#xf#-,ordering", want: []Entry{{Name: "popen", Opts: []Option{{"argv", "#tar#xf#-"}}}, {Name: "ordering"}}},
		// Decoded once, before the split at ";" and "=".
		{in: "popen:argv=#a%2Cb%3Bc=d", want: []Entry{{Name: "popen", Opts: []Option{{"argv", "#a,b"}, {"c", "d"}}}}},
		{in: "x:k=100%%;j=%zz%4", want: []Entry{{Name: "x", Opts: []Option{{"k", "100%"}, {"j", "%zz%4"}}}}},
		{in: "file,gridftp_multicast:%3Burls%3D%23ftp%253A//h%253A1/a?%23ftp%253A//h%253A2/b?",
			want: []Entry{{Name: "file"}, {Name: "gridftp_multicast", Opts: []Option{{"urls", "#ftp%3A//h%3A1/a?#ftp%3A//h%3A2/b?"}}}}},
		{in: "a,,b", want: []Entry{{Name: "a"}, {Name: ""}, {Name: "b"}}},
		{in: "FILE", want: []Entry{{Name: "FILE"}}},
		{in: "popen:argv", bad: true},
		{in: "popen:=x", bad: true},
		{in: "popen:a=1;;b=2", want: []Entry{{Name: "popen", Opts: []Option{{"a", "1"}, {"b", "2"}}}}},
	} {
		got, err := Parse(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %v, %v; want ErrSyntax", tt.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %#v, %v; want %#v", tt.in, got, err, tt.want)
		}
	}
}

func TestList(t *testing.T) {
	for in, want := range map[string][]string{
		"#tar#cf#-":  {"tar", "cf", "-"},
		"#a##b":      {"a", "", "b"},
		"#a#":        {"a"},
		"|x y|z":     {"x y", "z"},
		"":           nil,
		"#":          {},
		"%23tar%23x": {"23tar", "23x"}, // GCT's approval reads the raw string this way too
	} {
		if got := List(in); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFormat: what a client writes, the server parses back, whatever the
// values hold but ";".
func TestFormat(t *testing.T) {
	argv, err := JoinList([]string{"/bin/tar", "cf", "-", "-C", "/data/a,b", "50% done", "x#y"}, "#$^*!|")
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != '$' {
		t.Fatalf("JoinList chose %q, which an element holds", argv[0])
	}
	in := []Entry{{Name: "popen", Opts: []Option{{"argv", argv}, {"env", "#A=1\tB"}}}, {Name: "ordering"}}
	s, err := Format(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse(s)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("Parse(Format(%v)) = %v, %v (sent %q)", in, out, err, s)
	}
	for _, bad := range [][]Entry{
		{{Name: "popen", Opts: []Option{{"argv", "#a;b"}}}},
		{{Name: "a,b"}},
		{{Name: ""}},
		{{Name: "x", Opts: []Option{{"k=", "v"}}}},
	} {
		if s, err := Format(bad); err == nil {
			t.Errorf("Format(%v) = %q, want an error", bad, s)
		}
	}
	if _, err := JoinList([]string{"#$"}, "#$"); err == nil {
		t.Error("JoinList found a delimiter where none is free")
	}
}
