// Package myproxy is a client of MyProxy, the online credential
// repository of the grid: Logon fetches a short-lived proxy of a
// credential stored with myproxy-init, as myproxy-logon does.
//
// The protocol, as MyProxy 6.2's myproxy-server and myproxy-logon speak
// it (recorded in clear by interop's TestMyProxyWire, a relay between the
// two; MyProxy's own sources are not at hand):
//
//   - The client connects (TCP port 7512 by default) and runs a GSI
//     security context on the socket as the initiator, with nothing in
//     the clear before the TLS handshake: TLS (1.3 between these two)
//     in which an anonymous client (myproxy-logon without a credential)
//     sends no certificate, then the server's keep-going byte under TLS
//     1.3 and the client's delegation flag '0' (gss.Over with sslOnly
//     false).
//   - Every message after that is one GSI token: one TLS record of
//     application data. The peers read a message as one record, so a
//     message must not be split (crypto/tls keeps the first records of a
//     connection under about 1150 bytes: Logon's request is bounded by
//     that, and its certificate request of an RSA 2048 key is 667 bytes).
//   - The client's request is text, "KEY=value" lines and a NUL:
//     "VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=alice\nPASSPHRASE=...\nLIFETIME=43200\n\x00"
//     (COMMAND 0 is GET; LIFETIME in seconds; 43200 is myproxy-logon's
//     default of 12 hours).
//   - The server answers in the same form: "VERSION=MYPROXYv2\nRESPONSE=0\n\x00"
//     for yes; RESPONSE=1 with an ERROR line per line of its message for
//     no: "ERROR=Bad password\nERROR=invalid credential passphrase\n" for
//     a wrong pass phrase, "ERROR=No credentials exist for username
//     \"bob\".\n" for an unknown user. RESPONSE=2 asks for more
//     authorization (AUTHORIZATION_DATA lines), which Logon does not offer.
//   - After a yes to GET the client sends a DER PKCS#10 request for a new
//     key; the server answers with one byte, the number of certificates,
//     and their DER back to back in one message: the proxy it signed for
//     the request, then the stored chain down to the end-entity
//     certificate (4 for a credential myproxy-init stored: the new proxy,
//     the server's stored proxy, myproxy-init's proxy, the user's
//     certificate). Then it sends a last response (RESPONSE=0, or 1 with
//     "Unable to delegate credentials.") and closes the connection;
//     myproxy-logon does not wait for that response, Logon reads it for
//     a few seconds.
//
// The server proves its identity with a host certificate: it must chain to
// a CA the caller trusts and, unless the caller gives the DN it expects,
// name the host dialled, as myproxy-logon(1) demands: CN=host/<host>,
// CN=myproxy/<host> or CN=<host> (a certificate with subject alternative
// names must name the host in them instead, as RFC 2818 has it).
package myproxy
