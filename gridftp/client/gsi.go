package client

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"ferry/gridftp"
	"ferry/gsi/gss"
)

// AuthGSI authenticates with a grid credential, as globus-url-copy does:
// AUTH GSSAPI, then ADAT tokens until the server says 235 (the TLS
// handshake inside them, then the delegation cfg asks for). From then on
// every command and reply is protected; log in next with
// Login(ctx, ":globus-mapping:", "") for the gridmap's default user, or a
// user name the gridmap allows.
func (c *Conn) AuthGSI(ctx context.Context, cfg gss.Config) error {
	fail := func(err error) error { return &HandshakeError{Stage: StageLogin, Addr: c.addr, Err: err} }
	if c.sec != nil {
		return fail(errors.New("AUTH GSSAPI: already authenticated"))
	}
	if rep, err := c.Do(ctx, "AUTH GSSAPI"); err != nil {
		return fail(err)
	} else if rep.Code != gridftp.CodeAuthNeedData {
		return fail(fmt.Errorf("AUTH GSSAPI: %s", rep.Text()))
	}
	g := gss.NewInitiator(cfg)
	var in []byte
	for {
		out, done, err := g.Step(in)
		if err != nil {
			return fail(err)
		}
		if len(out) == 0 {
			return fail(fmt.Errorf("%w: GSSAPI ended with nothing for the server", gss.ErrProtocol))
		}
		rep, err := c.Do(ctx, "ADAT %s", base64.StdEncoding.EncodeToString(out))
		if err != nil {
			return fail(err)
		}
		tok, err := adatToken(rep)
		if err != nil {
			return fail(err)
		}
		switch {
		case rep.Code == gridftp.CodeAuthMoreData && !done:
			in = tok
			continue
		case rep.Code == gridftp.CodeAuthDone && done && tok == nil:
		case rep.Code == gridftp.CodeAuthDone && !done && tok != nil:
			if _, done, err = g.Step(tok); err != nil || !done {
				return fail(fmt.Errorf("%w: the server's last token did not end the exchange (%v)", gss.ErrProtocol, err))
			}
		default:
			return fail(fmt.Errorf("%w: %d after ADAT", gss.ErrProtocol, rep.Code))
		}
		break
	}
	c.sec = g
	c.r = bufio.NewReaderSize(&gridftp.OpenReplies{R: c.r, Unwrap: g.Unwrap}, 4096)
	return nil
}

// adatToken is the token of a 335 or 235 reply ("ADAT=<base64>"); nil
// when it has none.
func adatToken(rep gridftp.Reply) ([]byte, error) {
	t := strings.TrimSpace(rep.Text())
	i := strings.Index(t, "ADAT=")
	if i < 0 {
		return nil, nil
	}
	tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(t[i+len("ADAT="):]))
	if err != nil {
		return nil, fmt.Errorf("%w: a server token that is not base64", gss.ErrProtocol)
	}
	return tok, nil
}

// Authenticator logs a fresh session in: a password (Password) or a grid
// credential (GSILogin).
type Authenticator interface {
	Authenticate(ctx context.Context, c *Conn) error
}

// Password logs in with USER and PASS.
type Password struct{ User, Password string }

// Authenticate logs c in.
func (p Password) Authenticate(ctx context.Context, c *Conn) error {
	return c.Login(ctx, p.User, p.Password)
}

// GSILogin logs in with a grid credential: AUTH GSSAPI with Config, then
// USER (":globus-mapping:" when empty: the gridmap's default user). When
// Config delegates, DataCred is the session's data channel credential
// from then on: the server's default after a GSI login is DCAU A with
// what it was delegated, which DataCred (this side's own proxy, checking
// that the peer is of the same identity) matches.
type GSILogin struct {
	Config   gss.Config
	User     string
	DataCred *gridftp.DataCredential
	// Identity is the grid identity (DN) the credential proves: two
	// ends logged in as different identities cannot check each other
	// on their data channels.
	Identity string
}

// Authenticate logs c in.
func (g GSILogin) Authenticate(ctx context.Context, c *Conn) error {
	if err := c.AuthGSI(ctx, g.Config); err != nil {
		return err
	}
	user := g.User
	if user == "" {
		user = ":globus-mapping:"
	}
	if err := c.Login(ctx, user, ""); err != nil {
		return err
	}
	if g.Config.Delegate && g.DataCred != nil {
		c.data.cred, c.data.private = g.DataCred, false
	}
	return nil
}

// GSI reports whether the session logged in with a grid credential.
func (c *Conn) GSI() bool { return c.sec != nil }
