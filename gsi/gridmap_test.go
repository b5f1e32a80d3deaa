package gsi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testGridmap = `# comment
   # indented comment

"/C=US/O=Grid/OU=People/CN=Alice Smith" alice,asmith
"/C=US/O=Grid/CN=Quote \"Q\" Person" qp
/C=US/O=Grid/CN=NoSpaces	bob
"/C=US/O=Grid/CN=Zo\xC3\xA9" zoe
"/C=US/O=Grid/CN=host\/localhost" host1
"/DC=org/DC=grid/UID=joe/E=joe@grid.org" joe  ,  joe2
"/C=US/O=Grid/OU=People/CN=Alice Smith" second
`

func TestGridmap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grid-mapfile")
	os.WriteFile(path, []byte(testGridmap), 0o644)
	g, err := ReadGridmap(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dn, user string }{
		{"/C=US/O=Grid/OU=People/CN=Alice Smith", "alice"},
		{"/c=us/o=grid/ou=people/cn=alice smith", "alice"},
		{`/C=US/O=Grid/CN=Quote "Q" Person`, "qp"},
		{"/C=US/O=Grid/CN=NoSpaces", "bob"},
		{`/C=US/O=Grid/CN=Zo\xC3\xA9`, "zoe"},
		{`/C=US/O=Grid/CN=host\/localhost`, "host1"},
		{"/DC=org/DC=grid/USERID=joe/emailAddress=joe@grid.org", "joe"},
		{"/DC=org/DC=grid/UID=joe/Email=joe@grid.org", "joe"},
		{"/C=US/O=Grid/CN=Mallory", ""},
		{"/C=US/O=Grid/OU=People/CN=Alice", ""},
	} {
		user, ok := g.Lookup(tc.dn)
		if user != tc.user || ok != (tc.user != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.dn, user, ok, tc.user)
		}
	}
	if got := strings.Join(g.Users("/DC=org/DC=grid/UID=joe/E=joe@grid.org"), ","); got != "joe,joe2" {
		t.Errorf("Users = %s", got)
	}
	for _, bad := range []string{`"/CN=unclosed alice`, "/CN=nouser", `"/CN=x"`} {
		if _, err := ParseGridmap(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseGridmap(%q): %v", bad, err)
		}
	}
	if _, err := ReadGridmap(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("missing file accepted")
	}
}
