package engine

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// Data channels. Between two ferry servers (FEAT DATATLS) every copy makes
// a credential of its own and hands it to both (DCSC P): each data
// connection then proves it (DCAU A), so nobody else can take data from a
// passive port, put data into one, or be sent data by a PORT; with
// Options.Encrypt the payload is encrypted too (PROT P). With any other
// server the data channel is unauthenticated (DCAU N), and a ferry server
// at the passive end is told which address the sender comes from (OPTS
// PASV From): it admits no other.

// ErrNoEncryption refuses Options.Encrypt between servers that cannot
// encrypt their data channels with a credential they share.
var ErrNoEncryption = errors.New("encrypted data channels need both endpoints to be ferry servers (FEAT DATATLS) or both gsiftp:// with a delegated credential")

// gridIdentity is the identity of an endpoint's grid login; "" for
// another login.
func (e Endpoint) gridIdentity() string {
	if g, ok := e.Auth.(client.GSILogin); ok {
		return g.Identity
	}
	return ""
}

// gridData is the data channel credential of an endpoint's grid login,
// when it delegates.
func (e Endpoint) gridData() *gridftp.DataCredential {
	if g, ok := e.Auth.(client.GSILogin); ok && g.Config.Delegate {
		return g.DataCred
	}
	return nil
}

// credLifetime is how long a copy's credential is valid: longer than any
// run, which makes a new one.
const credLifetime = 7 * 24 * time.Hour

// secure makes the copy's data credential when both ends speak DATATLS,
// or takes the user's grid credential when both logged in with it: each
// end then already holds what it was delegated (DCAU A, as GCT does it),
// and the data channel proves the user's identity; so it does between a
// GSI end and ferry copy's own server holding the same proxy
// (Endpoint.DataIdentity). Between a GSI end and any other the data
// channel is unauthenticated (DCAU N).
func (c *copier) secure(s, d *client.Conn) error {
	switch {
	case s.GSI() && d.GSI() && c.src.gridIdentity() != c.dst.gridIdentity():
		// Logged in as different identities (a proxy of another CA at
		// each end): neither end's delegated proxy proves anything to the
		// other, so both get a credential of this copy's making (DCSC P),
		// as globus-url-copy -data-cred auto does.
		cred, err := gridftp.NewRSADataCredential(credLifetime)
		if err != nil {
			return err
		}
		c.cred, c.set.Authenticated, c.set.Encrypted = cred, true, c.opts.Encrypt
		return nil
	case s.GSI() && d.GSI():
		cred := c.src.gridData()
		if cred == nil {
			cred = c.dst.gridData()
		}
		if cred != nil {
			c.cred, c.set.Authenticated, c.set.Encrypted = cred, true, c.opts.Encrypt
			return nil
		}
		fallthrough
	case s.GSI() || d.GSI():
		g, other := c.src, c.dst
		if d.GSI() {
			g, other = c.dst, c.src
		}
		if cred := g.gridData(); cred != nil && other.DataIdentity != "" && other.DataIdentity == g.gridIdentity() {
			// ferry copy's own server holds the same proxy.
			c.cred, c.set.Authenticated, c.set.Encrypted = cred, true, c.opts.Encrypt
			return nil
		}
		if c.opts.Encrypt {
			return ErrNoEncryption
		}
		return nil
	}
	_, sok := s.Feature("DATATLS")
	_, dok := d.Feature("DATATLS")
	if !sok || !dok {
		if c.opts.Encrypt {
			return ErrNoEncryption
		}
		return nil
	}
	cred, err := gridftp.NewDataCredential(credLifetime)
	if err != nil {
		return err
	}
	c.cred, c.set.Authenticated, c.set.Encrypted = cred, true, c.opts.Encrypt
	return nil
}

// senderAddrs are the addresses a passive ferry server of an
// unauthenticated pair should admit: the host of the sending side's
// control connection, as this client reaches it. None when the passive
// side is not ferry's, or the address is not a TCP one (a connect agent).
func senderAddrs(p *client.Pair) []netip.Addr {
	passive, active := p.Dst, p.Src
	if p.Reverse {
		passive, active = p.Src, p.Dst
	}
	if _, ok := passive.Feature("DATATLS"); !ok {
		return nil
	}
	ta, ok := active.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return nil
	}
	return []netip.Addr{ip.Unmap()}
}
