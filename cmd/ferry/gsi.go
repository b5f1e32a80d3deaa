package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"ferry/gridftp/client"
	"ferry/gsi"
	"ferry/gsi/gsilogin"
)

// readProxy reads the user's proxy at path ("": $X509_USER_PROXY, else
// /tmp/x509up_u<uid>, made by grid-proxy-init or myproxy-logon) and
// refuses a missing or expired one with what to do.
func readProxy(path string) (*gsi.Credential, string, error) {
	if path == "" {
		path = gsi.DefaultProxyPath()
	}
	cred, err := gsi.ReadCredential(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, path, fmt.Errorf("no grid proxy at %s: make one with grid-proxy-init or myproxy-logon, or set X509_USER_PROXY", path)
	case err != nil:
		return nil, path, fmt.Errorf("grid proxy %s: %w", path, err)
	}
	if err := gsilogin.Check(cred, time.Now()); errors.Is(err, gsilogin.ErrExpired) {
		return nil, path, fmt.Errorf("grid proxy %s expired at %s: make a new one with grid-proxy-init or myproxy-logon", path, when(cred.NotAfter()))
	} else if err != nil {
		return nil, path, fmt.Errorf("grid proxy %s: %w", path, err)
	}
	return cred, path, nil
}

// gridLogin is the login of a gsiftp:// URL (gsilogin.New): the user's
// proxy at path (readProxy: "" for the default), the CAs of $X509_CERT_DIR (else
// /etc/grid-security/certificates), a full proxy delegated to the server
// (for its data channels), and the server's certificate checked to be
// the host's: its CN is host, host/host, ftp/host or gsiftp/host.
func gridLogin(host, user, path string) (client.GSILogin, error) {
	cred, _, err := readProxy(path)
	if err != nil {
		return client.GSILogin{}, err
	}
	trust, err := gsi.LoadCADir(gsi.DefaultCADir())
	if err != nil {
		return client.GSILogin{}, fmt.Errorf("trusted CAs: %w (set X509_CERT_DIR)", err)
	}
	return gsilogin.New(cred, trust, host, user), nil
}
