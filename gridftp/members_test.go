package gridftp

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
)

// TestMembersReply: a 113 reply goes over the wire and back, whatever the
// names and messages hold.
func TestMembersReply(t *testing.T) {
	ms := []Member{
		{Name: "a", Size: 51200, Sum: "0cc175b9c0f1b6a831c399e269772661"},
		{Name: "dir/with space/100%.txt", Size: 0},
		{Name: "ünï\tcode\r\nname", Size: 7},
		{Name: "gone", Fault: &Reply{Code: 550, Lines: []string{"PATH_NOT_FOUND: no such file", "second\rline"}}},
	}
	var b strings.Builder
	MembersReply(ms).WriteTo(&b)
	r, err := ReadReply(bufio.NewReader(strings.NewReader(b.String())))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMembers(r)
	if err != nil {
		t.Fatal(err)
	}
	ms[3].Fault = &Reply{Code: 550, Lines: []string{"PATH_NOT_FOUND: no such file second line"}}
	if !reflect.DeepEqual(got, ms) {
		t.Fatalf("got %+v\nwant %+v", got, ms)
	}
	for _, bad := range []string{
		"113-Members\r\n ok a x -\r\n113 End.\r\n",
		"113-Members\r\n ok %zz 1 -\r\n113 End.\r\n",
		"113-Members\r\n fail a 226 fine\r\n113 End.\r\n",
		"113-Members\r\n maybe a 1 -\r\n113 End.\r\n",
		"113-Members\r\n ok a 1\r\n113 End.\r\n",
	} {
		r, err := ReadReply(bufio.NewReader(strings.NewReader(bad)))
		if err != nil {
			t.Fatal(err)
		}
		if ms, err := ParseMembers(r); err == nil {
			t.Errorf("%q parsed: %+v", bad, ms)
		}
	}
}

func TestMembersCommands(t *testing.T) {
	names := []string{"a", "b c", strings.Repeat("x", 40), "d"}
	got := MembersCommands(names, 30)
	want := []string{"SITE MEMBERS a b%20c", "SITE MEMBERS " + strings.Repeat("x", 40), "SITE MEMBERS d"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	var back []string
	for _, c := range got {
		for _, f := range strings.Fields(strings.TrimPrefix(c, "SITE MEMBERS ")) {
			n, err := DecodeName(f)
			if err != nil {
				t.Fatal(err)
			}
			back = append(back, n)
		}
	}
	if !reflect.DeepEqual(back, names) {
		t.Fatalf("decoded %q, want %q", back, names)
	}
}
