package domain

import (
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHKey is a public key with which a user logs in to the SSH command
// gateway (ferry server --ssh-listen).
type SSHKey struct {
	ID          int64
	UserID      int64
	Line        string // the key as an authorized_keys line: TYPE BASE64 [COMMENT]
	Fingerprint string // SHA256:..., as ssh-keygen -l shows it
	Created     time.Time
}

// maxSSHKeyLine bounds an authorized_keys line (an RSA key of 16384 bits
// is about 2,800 bytes).
const maxSSHKeyLine = 8 << 10

// ParseSSHKey reads one public key in authorized_keys form (options are
// refused: the gateway's own policy applies to every key) and returns it
// with its fingerprint, the line written back without options. EInvalid
// when it is not one.
func ParseSSHKey(line string) (SSHKey, error) {
	line = strings.TrimSpace(line)
	if len(line) > maxSSHKeyLine {
		return SSHKey{}, Errorf(EInvalid, "SSH public key: longer than %d bytes", maxSSHKeyLine)
	}
	pk, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	switch {
	case err != nil:
		return SSHKey{}, Errorf(EInvalid, "SSH public key: want one line of a .pub file (ssh-ed25519 AAAA... comment)")
	case len(options) > 0:
		return SSHKey{}, Errorf(EInvalid, "SSH public key: options (%s) are not taken", strings.Join(options, ","))
	case len(strings.TrimSpace(string(rest))) > 0:
		return SSHKey{}, Errorf(EInvalid, "SSH public key: one key at a time")
	}
	out := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if comment = strings.Join(strings.Fields(comment), " "); comment != "" {
		out += " " + comment
	}
	return SSHKey{Line: out, Fingerprint: ssh.FingerprintSHA256(pk)}, nil
}
