// Package gsilogin makes the GridFTP login of a grid credential
// (client.GSILogin) the way every ferry client uses one — ferry copy with
// the user's proxy file, the service's workers and file operations with
// the proxy a user activated an endpoint with: a full proxy delegated to
// the server (for its data channels), the server's certificate checked
// against the trusted CAs and to be the host's, and the data channel's
// peer checked to be of the user's own identity (DCAU A).
package gsilogin

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gsi"
	"ferry/gsi/gss"
)

// ErrExpired is wrapped by Check for a credential past its NotAfter.
var ErrExpired = errors.New("the grid proxy expired")

// Check refuses a credential that cannot log anyone in at now: expired,
// or without an identity.
func Check(cred *gsi.Credential, now time.Time) error {
	switch {
	case cred == nil || len(cred.Chain) == 0 || cred.Key == nil:
		return errors.New("no grid credential")
	case !now.Before(cred.NotAfter()):
		return fmt.Errorf("%w at %s", ErrExpired, cred.NotAfter().UTC().Format(time.RFC3339))
	case cred.Identity() == "":
		return errors.New("the grid proxy names no identity")
	}
	return nil
}

// New is the login with cred on the server host (a name or address, as
// the gsiftp:// URL gives it) as user ("" for the server's grid-mapfile
// mapping). The server's chain is verified with trust and its DN must
// name host (HostDN); a full proxy of cred, as long-lived as cred, is
// delegated; the data channels use cred and accept only a peer of cred's
// identity.
func New(cred *gsi.Credential, trust *gsi.Trust, host, user string) client.GSILogin {
	return Verified(cred, func(chain []*x509.Certificate) (string, error) {
		id, err := trust.Verify(chain, time.Now())
		if err != nil {
			return "", err
		}
		return id.DN, nil
	}, host, user)
}

// Verified is New with the check of a peer's chain as a function: the
// trust of a server that logs in onward with what its client delegated
// (a multicast hop's gsiftp:// children).
func Verified(cred *gsi.Credential, verify func(chain []*x509.Certificate) (dn string, err error), host, user string) client.GSILogin {
	me := cred.Identity()
	verifyHost := func(chain []*x509.Certificate) error {
		dn, err := verify(chain)
		if err != nil {
			return err
		}
		if !HostDN(dn, host) {
			return fmt.Errorf("the server is %q, not host %s", dn, host)
		}
		return nil
	}
	sameUser := func(chain []*x509.Certificate) error {
		dn, err := verify(chain)
		if err != nil {
			return err
		}
		if dn != me {
			return fmt.Errorf("the data channel's peer is %q, not %q", dn, me)
		}
		return nil
	}
	return client.GSILogin{
		Config: gss.Config{
			Certificate: cred.TLSCertificate(),
			VerifyPeer:  verifyHost,
			Delegate:    true,
			SignRequest: func(csr []byte) ([]byte, error) {
				return gsi.SignRequest(cred, csr, gsi.ProxyOptions{Lifetime: time.Until(cred.NotAfter()), PathLen: gsi.NoPathLen})
			},
		},
		User:     user,
		DataCred: gridftp.PeerCheckedCredential(cred.TLSCertificate(), sameUser),
		Identity: me,
	}
}

// HostDN reports whether a server's DN names host, as GSI's host
// authorization takes it: the last CN is host, or service/host with
// service host, ftp or gsiftp.
func HostDN(dn, host string) bool {
	i := strings.LastIndex(dn, "/CN=")
	if i < 0 {
		return false
	}
	// OpenSSL 3 writes a '/' inside a value as "\/" (gsi.OneLine).
	cn := strings.ToLower(strings.ReplaceAll(dn[i+len("/CN="):], `\/`, "/"))
	host = strings.ToLower(host)
	for _, svc := range []string{"", "host/", "ftp/", "gsiftp/"} {
		if cn == svc+host {
			return true
		}
	}
	return false
}
