package gridftp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The schemes of GridFTP URLs.
const (
	FTP    = "ftp"    // a password login, or anonymous
	GSIFTP = "gsiftp" // a GSI login with a grid credential
	SSHFTP = "sshftp" // a control channel over ssh
)

// DefaultPort is the port of a URL of scheme that names none: 21 for
// ftp://, 2811 for gsiftp://, 22 for sshftp://; "" for another scheme.
func DefaultPort(scheme string) string {
	switch scheme {
	case FTP:
		return "21"
	case GSIFTP:
		return "2811"
	case SSHFTP:
		return "22"
	}
	return ""
}

// ErrNotURL and ErrNoHost report a URL that does not parse and one that
// names no host.
var (
	ErrNotURL = errors.New("not a URL")
	ErrNoHost = errors.New("no host")
)

// SchemeError reports a URL whose scheme is not a GridFTP one.
type SchemeError struct{ Scheme string }

func (e *SchemeError) Error() string {
	return fmt.Sprintf("scheme %q is not supported: want ftp://, gsiftp:// or sshftp://", e.Scheme)
}

// URL is a GridFTP URL: scheme://[user[:password]@]host[:port][/path].
type URL struct {
	Scheme   string        // FTP, GSIFTP or SSHFTP
	User     *url.Userinfo // nil when the URL names none
	Host     string        // a name or an address, an IPv6 one without brackets
	Port     string        // "" when the URL names none
	Path     string        // "" when the URL names none
	RawQuery string        // after "?", which a GridFTP URL does not use
	Fragment string        // after "#", which a GridFTP URL does not use
}

// Parse reads a GridFTP URL. Its errors do not repeat s, which may hold a
// password: the caller names it as it shows it (Redact).
func Parse(s string) (URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// Unwrapped: a *url.Error names the URL, password and all.
		return URL{}, fmt.Errorf("%w: %v", ErrNotURL, errors.Unwrap(err))
	}
	if u.Opaque != "" {
		return URL{}, ErrNoHost
	}
	g := URL{Scheme: u.Scheme, User: u.User, Host: u.Hostname(), Port: u.Port(), Path: u.Path,
		RawQuery: u.RawQuery, Fragment: u.Fragment}
	if err := g.Check(); err != nil {
		return URL{}, err
	}
	return g, nil
}

// Check reports what makes u no GridFTP URL: a scheme of another kind
// (a *SchemeError), no host (ErrNoHost), or a port out of range.
func (u URL) Check() error {
	if DefaultPort(u.Scheme) == "" {
		return &SchemeError{u.Scheme}
	}
	if u.Host == "" {
		return ErrNoHost
	}
	if u.Port != "" {
		if n, err := strconv.Atoi(u.Port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is out of range (1 to 65535)", u.Port)
		}
	}
	return nil
}

// Addr is the host:port to dial: the URL's port, else its scheme's
// default.
func (u URL) Addr() string {
	if u.Port != "" {
		return net.JoinHostPort(u.Host, u.Port)
	}
	return net.JoinHostPort(u.Host, DefaultPort(u.Scheme))
}

// Server is the URL of u's server as a service keeps it:
// scheme://host:port, with the default port written out.
func (u URL) Server() string { return (&url.URL{Scheme: u.Scheme, Host: u.Addr()}).String() }

// String writes u back as a URL, its user and password included.
func (u URL) String() string {
	host := u.Host
	if u.Port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, u.Port)
		host = strings.TrimSuffix(host, ":")
	}
	return (&url.URL{Scheme: u.Scheme, User: u.User, Host: host, Path: u.Path,
		RawQuery: u.RawQuery, Fragment: u.Fragment}).String()
}

// GSI reports a gsiftp:// URL, whose server takes a grid credential.
func (u URL) GSI() bool { return u.Scheme == GSIFTP }

// SSH reports an sshftp:// URL, whose control channel runs over ssh.
func (u URL) SSH() bool { return u.Scheme == SSHFTP }
