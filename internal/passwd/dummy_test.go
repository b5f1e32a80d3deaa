package passwd

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// Unknown users are compared against a hash of the highest cost in the file.
func TestDummyCost(t *testing.T) {
	content := ""
	for _, c := range []int{4, 6, 5} {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), c)
		if err != nil {
			t.Fatal(err)
		}
		content += string(rune('a'+c)) + ":" + string(h) + "\n"
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := bcrypt.Cost(f.dummy); err != nil || c != 6 {
		t.Errorf("dummy cost = %d, %v; want 6", c, err)
	}
}
