package domain_test

import (
	"strings"
	"testing"

	"ferry/service/domain"
)

func TestParseSSHKey(t *testing.T) {
	const ed = "AAAAC3NzaC1lZDI1NTE5AAAAIGb0RS8IHuw7t1iT8yHgeK4oEn9WEf5d6X3Lx3bNU3k6"
	for _, c := range []struct {
		name, line, want, err string
	}{
		{"plain", "ssh-ed25519 " + ed + " alice@laptop", "ssh-ed25519 " + ed + " alice@laptop", ""},
		{"no comment, blanks", "  ssh-ed25519 " + ed + "\n", "ssh-ed25519 " + ed, ""},
		{"comment spaces folded", "ssh-ed25519 " + ed + " my  key\there", "ssh-ed25519 " + ed + " my key here", ""},
		{"options refused", `command="/bin/sh" ssh-ed25519 ` + ed, "", "options"},
		{"two keys", "ssh-ed25519 " + ed + " a\nssh-ed25519 " + ed + " b", "", "one key"},
		{"garbage", "hello", "", "want one line"},
		{"empty", "", "", "want one line"},
		{"too long", "ssh-ed25519 " + strings.Repeat("A", 9000), "", "longer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := domain.ParseSSHKey(c.line)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || domain.ErrorCode(err) != domain.EInvalid {
					t.Fatalf("err %v, want EInvalid with %q", err, c.err)
				}
				return
			}
			if err != nil || k.Line != c.want || !strings.HasPrefix(k.Fingerprint, "SHA256:") {
				t.Fatalf("got %+v, %v; want line %q", k, err, c.want)
			}
		})
	}
}
