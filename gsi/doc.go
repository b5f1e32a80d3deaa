// Package gsi is the PKI foundation of Grid Security Infrastructure (GSI)
// authentication: X.509 credentials and RFC 3820 proxy certificates,
// delegation (a proxy request made by one side, signed by the other), the
// CAs a party trusts (an OpenSSL hashed directory such as
// /etc/grid-security/certificates) and the verification of a peer's
// chain of proxies up to its end-entity certificate, the DN of that
// certificate in OpenSSL's one-line form ("/C=US/O=Grid/CN=Alice"), and
// the grid-mapfile that maps such DNs to local users.
//
// crypto/x509 refuses proxy certificates (their issuer is no CA), so
// Trust.Verify checks the end-entity certificate with x509 and the
// proxies above it by the rules of RFC 3820 section 4 and of GCT's
// globus_gsi_callback.c. The package uses only the standard library and
// knows nothing of GSSAPI, TLS token framing or GridFTP: those layers
// build on it.
package gsi
