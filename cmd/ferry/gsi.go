package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gsi"
	"ferry/gsi/gss"
)

// gridLogin is the login of a gsiftp:// URL: the user's proxy (path, or
// $X509_USER_PROXY, else /tmp/x509up_u<uid>, made by grid-proxy-init or
// myproxy-logon), the CAs of $X509_CERT_DIR (else
// /etc/grid-security/certificates), a full proxy delegated to the server
// (for its data channels), and the server's certificate checked to be
// the host's: its CN is host, host/host, ftp/host or gsiftp/host.
func gridLogin(host, user, path string) (client.GSILogin, error) {
	if path == "" {
		path = gsi.DefaultProxyPath()
	}
	cred, err := gsi.ReadCredential(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return client.GSILogin{}, fmt.Errorf("no grid proxy at %s: make one with grid-proxy-init or myproxy-logon, or set X509_USER_PROXY", path)
	case err != nil:
		return client.GSILogin{}, fmt.Errorf("grid proxy %s: %w", path, err)
	case time.Now().After(cred.NotAfter()):
		return client.GSILogin{}, fmt.Errorf("grid proxy %s expired at %s: make a new one with grid-proxy-init or myproxy-logon", path, cred.NotAfter().Format(time.RFC3339))
	}
	trust, err := gsi.LoadCADir(gsi.DefaultCADir())
	if err != nil {
		return client.GSILogin{}, fmt.Errorf("trusted CAs: %w (set X509_CERT_DIR)", err)
	}
	me := cred.Identity()
	verifyHost := func(chain []*x509.Certificate) error {
		id, err := trust.Verify(chain, time.Now())
		if err != nil {
			return err
		}
		if !hostDN(id.DN, host) {
			return fmt.Errorf("the server is %q, not host %s", id.DN, host)
		}
		return nil
	}
	sameUser := func(chain []*x509.Certificate) error {
		id, err := trust.Verify(chain, time.Now())
		if err != nil {
			return err
		}
		if id.DN != me {
			return fmt.Errorf("the data channel's peer is %q, not %q", id.DN, me)
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
	}, nil
}

// hostDN reports whether a server's DN names host, as GSI's host
// authorization takes it: the last CN is host, or service/host.
func hostDN(dn, host string) bool {
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
