// Package tunnel is the wire protocol between ferry connect agents and the
// service's relay. An agent only ever connects out: it keeps one TLS
// connection to the relay, and the two multiplex streams over it
// (Session). The relay opens a stream for each GridFTP control connection
// it makes to the agent (KindGridFTP); the agent opens one for each
// passive data listener it asks the relay for (KindListen), naming the
// senders it admits (Listen), and for each data connection an admitted
// sender makes to that listener it opens a plain TCP connection of its
// own to the relay, which starts with JoinMagic and the token the relay
// sent, and which the relay splices to the sender's.
//
// A Session is yamux (github.com/hashicorp/yamux) over that connection,
// each stream starting with its kind. Every stream has a flow-control
// window: a peer may send no more than Window unread bytes on a stream,
// and a session has at most MaxStreams, so a tunnel buffers at most
// MaxStreams × Window bytes per side. Each side pings every KeepAlive; a
// ping unanswered, or a write stalled, for writeTimeout ends the session.
//
// The relay's TLS listener serves three protocols, told apart by ALPN:
// ProtoPair trades a one-time setup key for a certificate (PairRequest,
// PairReply); ProtoTunnel, with that certificate as the client's, starts
// with one Hello line from the relay and then carries a Session (an agent
// of ProtoTunnelOld, before yamux, gets a Hello that says it is too old;
// an agent whose relay speaks only that says the relay is);
// ProtoPeer, with a service process's certificate as the client's, lets
// another process of the service reach an agent connected to this relay
// (PeerRequest, PeerReply).
//
// Both sides check the names in the certificates of ferry connect: the
// relay's names RelayName, an agent's names its endpoint and the
// generation of its setup key (AgentSubject, ParseAgent), and a setup key
// carries the Pin of the service's CA; the PEM forms they are kept in are
// CertPEM and KeyPEM.
//
// A relay listens on a port of its own, or is reached through the
// service's HTTP listener by an upgrade (Upgrade); relay URLs name either,
// and Dialer.Dial opens a connection to one.
package tunnel
