package server

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"ferry/gridftp"
	"ferry/gsi/gss"
)

// GSI logs clients in with grid certificates, as GCT does: AUTH GSSAPI,
// the ADAT exchange (TLS in tokens, then the client's delegation), and
// from then on every command and reply protected (ENC, 632). The user a
// session runs as comes from the gridmap (Map), whatever name it asks
// for: USER :globus-mapping: takes the DN's default.
type GSI struct {
	// Credential is the host's certificate chain and key.
	Credential tls.Certificate
	// Verify checks a client's chain (leaf first, proxies and all) and
	// returns the identity it proves, a DN.
	Verify func(chain []*x509.Certificate) (dn string, err error)
	// Map is the gridmap: the local user dn logs in as, when it asks for
	// want ("" or ":globus-mapping:" for its default).
	Map func(dn, want string) (user string, ok bool)
	// NewRequest makes the key and the request of a credential the
	// client delegates (for the data channels and further hops); nil
	// takes none.
	NewRequest func(peer *x509.Certificate) (csrDER []byte, key crypto.Signer, err error)
}

// gsiState is a session's side of GSI.
type gsiState struct {
	ctx       *gss.Context   // the exchange under way (AUTH, ADAT)
	dn        string         // the identity the exchange proved
	delegated *gss.Delegated // what the client delegated
	mapped    bool           // USER named a user the gridmap allows
	// dataCred is the delegated credential as the data channels'
	// (DCAU A, the default after a GSI login); subject, after DCAU S,
	// is who the other end must be instead of the session's identity.
	dataCred *gridftp.DataCredential
	subject  string
}

// loggedInGSI sets a GSI session's data channels up as GCT does: DCAU A
// with the credential the client delegated, each data connection's peer
// checked to be of the same identity (or DCAU S's subject).
func (ss *session) loggedInGSI() {
	d := ss.gsi.delegated
	if d == nil {
		return // no credential to present: DCAU N until DCSC
	}
	cert := tls.Certificate{PrivateKey: d.Key, Leaf: d.Chain[0]}
	for _, c := range d.Chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	g := ss.srv.GSI
	ss.gsi.dataCred = gridftp.PeerCheckedCredential(cert, func(chain []*x509.Certificate) error {
		dn, err := g.Verify(chain)
		if err != nil {
			return err
		}
		want := ss.gsi.dn
		if ss.gsi.subject != "" {
			want = ss.gsi.subject
		}
		if dn != want {
			return fmt.Errorf("the data channel's peer is %q, not %q", dn, want)
		}
		return nil
	})
	ss.dataCred, ss.dcauA = ss.gsi.dataCred, true
}

// errUnprotected is a command sent in the clear on a protected channel.
var errUnprotected = errors.New("unprotected command on a protected control channel")

func (ss *session) handleAUTH(arg string) bool {
	switch {
	case ss.srv.GSI == nil || !strings.EqualFold(strings.TrimSpace(arg), "GSSAPI"):
		ss.reply(gridftp.CodeParamNotSupported, "Security mechanism not understood.")
	case ss.protected.Load() != nil:
		ss.reply(gridftp.CodeBadSequence, "Already authenticated.")
	default:
		g := ss.srv.GSI
		ss.gsi = gsiState{}
		ss.gsi.ctx = gss.NewAcceptor(gss.Config{
			Certificate: g.Credential,
			VerifyPeer: func(chain []*x509.Certificate) error {
				dn, err := g.Verify(chain)
				ss.gsi.dn = dn
				return err
			},
			NewRequest: g.NewRequest,
		})
		ss.reply(gridftp.CodeAuthNeedData, "Using authentication type; ADAT must follow.")
	}
	return true
}

func (ss *session) handleADAT(arg string) bool {
	c := ss.gsi.ctx
	if c == nil {
		ss.reply(gridftp.CodeBadSequence, "ADAT before AUTH.")
		return true
	}
	tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(arg))
	if err != nil {
		ss.gsi = gsiState{}
		ss.reply(gridftp.CodeBadArguments, "ADAT: the token is not base64.")
		return true
	}
	out, done, err := c.Step(tok)
	switch {
	case err != nil:
		ss.log.Warn("GSI login refused", "dn", ss.gsi.dn, "err", err)
		ss.gsi = gsiState{}
		ss.replyf(gridftp.CodeAuthRejected, "GSSAPI authentication failed: %s", oneLine(err))
	case !done:
		ss.reply(gridftp.CodeAuthMoreData, "ADAT="+base64.StdEncoding.EncodeToString(out))
	default:
		if len(out) > 0 {
			ss.reply(gridftp.CodeAuthDone, "ADAT="+base64.StdEncoding.EncodeToString(out))
		} else {
			ss.reply(gridftp.CodeAuthDone, "GSSAPI Authentication successful.")
		}
		ss.gsi.delegated, ss.gsi.ctx = c.Delegated(), nil
		ss.protected.Store(c) // from the next reply on
		ss.log.Info("GSI authenticated", "dn", ss.gsi.dn, "delegated", ss.gsi.delegated != nil)
	}
	return true
}

// userGSI handles USER on a GSI session: the gridmap decides.
func (ss *session) userGSI(arg string) {
	user, ok := ss.srv.GSI.Map(ss.gsi.dn, strings.TrimSpace(arg))
	if !ok {
		ss.gsi.mapped = false
		ss.log.Warn("GSI login refused: not in the gridmap", "dn", ss.gsi.dn, "user", arg)
		ss.replyf(gridftp.CodeNotLoggedIn, "No local mapping for Globus ID %q.", ss.gsi.dn)
		return
	}
	ss.user, ss.loggedIn, ss.gsi.mapped = user, false, true
	ss.replyf(gridftp.CodeNeedPassword, "GSSAPI user %s is authorized as %s.", ss.gsi.dn, user)
}
