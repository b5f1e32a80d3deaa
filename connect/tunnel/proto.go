package tunnel

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
)

// ALPN protocols of the relay's TLS listener.
const (
	ProtoPair   = "ferry-pair/1"
	ProtoTunnel = "ferry-tunnel/2" // a Session of yamux streams
	ProtoPeer   = "ferry-peer/1"

	// ProtoTunnelOld is the tunnel of agents before yamux: the relay
	// answers its Hello with why it cannot serve them.
	ProtoTunnelOld = "ferry-tunnel/1"
)

// Stream kinds.
const (
	KindGridFTP = "gridftp" // relay → agent: a GridFTP control connection
	KindListen  = "listen"  // agent → relay: a passive data listener on the relay (Listen)
	KindCert    = "cert"    // relay → agent: a renewed certificate (DER), then EOF
	KindRelays  = "relays"  // relay → agent: one Relays line, then EOF
)

// JoinMagic starts a data connection an agent opens to the relay; a token
// of TokenLen characters follows, and then the data.
const JoinMagic = "FRJ1"

// TokenLen is the length of a join token: 16 random bytes in hex.
const TokenLen = 32

// NewToken returns a random join token.
func NewToken() string {
	var b [TokenLen / 2]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// PairRequest is what an agent sends on a ProtoPair connection: the secret
// part of its setup key and the public key to certify (PKIX DER). The
// private key never leaves the agent.
type PairRequest struct {
	Secret    string `json:"secret"`
	PublicKey []byte `json:"public_key"`
}

// PairReply answers a PairRequest: the agent's certificate and the CA's
// (DER), or why not.
type PairReply struct {
	Endpoint    string `json:"endpoint,omitempty"`
	Certificate []byte `json:"certificate,omitempty"`
	CA          []byte `json:"ca,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Hello is the relay's first line on a ProtoTunnel connection: the
// endpoint the agent serves and the URLs of the service's relays, or why
// the relay refuses it; Revoked says that trying again will not help.
type Hello struct {
	Endpoint string   `json:"endpoint,omitempty"`
	Name     string   `json:"name,omitempty"` // the endpoint's owner#name, for the agent's lines and logs
	Relays   []string `json:"relays,omitempty"`
	Error    string   `json:"error,omitempty"`
	Revoked  bool     `json:"revoked,omitempty"`
}

// Relays is what a KindRelays stream carries: the URLs of the service's
// relays now, any of which the agent may connect to when it loses its
// tunnel.
type Relays struct {
	URLs []string `json:"urls"`
}

// Operations of a PeerRequest.
const (
	PeerDial = "dial" // a GridFTP control connection to the agent
	PeerDrop = "drop" // end the agent's tunnel: its certificate is revoked
)

// PeerRequest is the first line a service process sends on a ProtoPeer
// connection to another's relay, with its process certificate as the
// client's: an operation on the agent of Endpoint, which is connected
// there. The relay answers with one PeerReply line; after a PeerDial that
// succeeded, the connection is the agent's GridFTP control connection.
type PeerRequest struct {
	Op       string `json:"op"`
	Endpoint string `json:"endpoint"`
}

// PeerReply answers a PeerRequest: empty, or why not.
type PeerReply struct {
	Error string `json:"error,omitempty"`
}

// Listen is the first line an agent sends on a KindListen stream: whom the
// passive listener admits. With Any, every sender: the agent's server
// authenticates each data connection itself (DCAU A, a TLS handshake under
// the transfer's credential). Else only senders at the addresses of From:
// the agent's server's GridFTP client and the third-party senders it named
// (OPTS PASV From), as ferry gridftp's own passive ports admit. The relay
// closes any other connection before the agent hears of it.
type Listen struct {
	Any  bool         `json:"any,omitempty"`
	From []netip.Addr `json:"from,omitempty"`
}

// Admits reports whether the listener admits a connection from ip.
func (l Listen) Admits(ip netip.Addr) bool {
	ip = ip.Unmap()
	return l.Any || slices.ContainsFunc(l.From, func(a netip.Addr) bool { return a.Unmap() == ip })
}

// Passive is what the relay sends on a KindListen stream, after the
// Listen: first the listener's address (or an error), then one Join token
// per sender it admitted.
type Passive struct {
	Addr  string `json:"addr,omitempty"`
	Join  string `json:"join,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxLine bounds a Hello line.
const maxLine = 4096

// WriteLine writes v as one JSON line.
func WriteLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadLine reads one JSON line into v, byte by byte, so that nothing after
// the line is consumed (a Session follows a Hello on the same connection).
func ReadLine(r io.Reader, v any) error {
	var line []byte
	var b [1]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return err
		}
		if b[0] == '\n' {
			break
		}
		if len(line) >= maxLine {
			return errors.New("tunnel: line too long")
		}
		line = append(line, b[0])
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("tunnel: bad line: %w", err)
	}
	return nil
}
