package gsi

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"
)

// Object identifiers of proxy certificates.
var (
	// OIDProxyCertInfo is RFC 3820's ProxyCertInfo extension.
	OIDProxyCertInfo = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 14}
	// OIDProxyCertInfoGSI3 is the ProxyCertInfo of the pre-RFC draft that
	// GT3 used ("GSI 3" proxies); its fields come in another order.
	OIDProxyCertInfoGSI3 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 222}
	// OIDInheritAll is the policy language of an impersonation proxy.
	OIDInheritAll = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 1}
	// OIDIndependent is the policy language of an independent proxy,
	// which does not carry its issuer's identity.
	OIDIndependent = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 2}
	// OIDLimitedProxy is GCT's policy language of a limited proxy
	// (proxypolicy.h LIMITED_PROXY_OID), which a GridFTP server accepts
	// for data but not to start jobs.
	OIDLimitedProxy = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 1, 1, 9}

	oidExtKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37}
)

// Defaults that follow grid-proxy-init and GCT's proxy library.
const (
	// DefaultLifetime is a proxy's lifetime when ProxyOptions gives none
	// (grid-proxy-init's 12 hours).
	DefaultLifetime = 12 * time.Hour
	// ClockSkew is how far before now a new proxy's NotBefore is put
	// (globus_gsi_proxy_handle_attrs.c DEFAULT_CLOCK_SKEW, 5 minutes).
	ClockSkew = 5 * time.Minute
	// NoPathLen in ProxyOptions.PathLen puts no limit on the proxies that
	// may follow.
	NoPathLen = -1
)

// ProxyOptions says what proxy NewProxy makes.
type ProxyOptions struct {
	// Lifetime is capped at the issuer's NotAfter; 0 means DefaultLifetime.
	Lifetime time.Duration
	// Limited makes a limited proxy. A proxy signed by a limited proxy is
	// always limited, as GCT makes it.
	Limited bool
	// PathLen is how many proxies may follow this one: NoPathLen (-1) for
	// no limit. Note the zero value, 0, forbids the holder to delegate.
	PathLen int
}

// proxyKind is what classify finds a certificate to be.
type proxyKind int

const (
	notProxy    proxyKind = iota
	legacyProxy           // GT2: CN=proxy or CN=limited proxy, no extension
	gsi3Proxy             // draft ProxyCertInfo 1.3.6.1.4.1.3536.1.222
	rfcProxy              // RFC 3820
)

func (k proxyKind) String() string {
	return [...]string{"end-entity certificate", "legacy (GT2) proxy", "draft (GSI 3) proxy", "RFC 3820 proxy"}[k]
}

// proxyInfo is what a certificate says of itself as a proxy.
type proxyInfo struct {
	kind      proxyKind
	language  asn1.ObjectIdentifier // policy language; nil for legacy
	hasPolicy bool                  // a policy octet string is present
	pathLen   int                   // -1: no constraint
	limited   bool
	critical  bool  // the ProxyCertInfo extension is critical
	err       error // a malformed ProxyCertInfo
}

// classify tells an end-entity certificate from the kinds of proxy: a
// certificate with a ProxyCertInfo extension (either OID), or one whose
// last RDN is CN=proxy or CN=limited proxy; a CA is never a proxy
// (globus_gsi_cert_utils.c, globus_gsi_cert_utils_get_cert_type).
func classify(c *x509.Certificate) proxyInfo {
	pi := proxyInfo{pathLen: -1}
	if c.BasicConstraintsValid && c.IsCA {
		return pi
	}
	var pci *pkix.Extension
	for i := range c.Extensions {
		e := &c.Extensions[i]
		if e.Id.Equal(OIDProxyCertInfo) || e.Id.Equal(OIDProxyCertInfoGSI3) {
			if pci != nil {
				pi.kind, pi.err = rfcProxy, errors.New("more than one ProxyCertInfo extension")
				return pi
			}
			pci = e
		}
	}
	if pci != nil {
		pi.critical = pci.Critical
		var err error
		if pci.Id.Equal(OIDProxyCertInfo) {
			pi.kind = rfcProxy
			pi.pathLen, pi.language, pi.hasPolicy, err = parsePCI(pci.Value, false)
		} else {
			pi.kind = gsi3Proxy
			pi.pathLen, pi.language, pi.hasPolicy, err = parsePCI(pci.Value, true)
		}
		if err != nil {
			pi.err = fmt.Errorf("malformed ProxyCertInfo: %w", err)
		}
		pi.limited = pi.language.Equal(OIDLimitedProxy)
		return pi
	}
	if cn, ok := lastCN(c.RawSubject); ok && (cn == "proxy" || cn == "limited proxy") {
		pi.kind, pi.limited = legacyProxy, cn == "limited proxy"
	}
	return pi
}

// lastCN returns the value of the name's last RDN when it is a single CN.
func lastCN(raw []byte) (string, bool) {
	rdns, err := parseName(raw)
	if err != nil || len(rdns) == 0 {
		return "", false
	}
	last := rdns[len(rdns)-1]
	if len(last) != 1 || !last[0].Type.Equal(oidCommonName) {
		return "", false
	}
	return string(last[0].Value.Bytes), true
}

// parsePCI decodes a ProxyCertInfo: RFC 3820's
//
//	SEQUENCE { pCPathLenConstraint INTEGER OPTIONAL, proxyPolicy ProxyPolicy }
//
// or the draft's SEQUENCE { proxyPolicy, [1] EXPLICIT INTEGER OPTIONAL }
// (proxycertinfo.c), where ProxyPolicy is
// SEQUENCE { policyLanguage OID, policy OCTET STRING OPTIONAL }.
func parsePCI(der []byte, draft bool) (pathLen int, lang asn1.ObjectIdentifier, hasPolicy bool, err error) {
	pathLen = -1
	var seq asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &seq); err != nil || len(rest) > 0 || seq.Tag != asn1.TagSequence || seq.Class != asn1.ClassUniversal || !seq.IsCompound {
		return 0, nil, false, errors.New("not a SEQUENCE")
	}
	var elems []asn1.RawValue
	for b := seq.Bytes; len(b) > 0; {
		var e asn1.RawValue
		if b, err = asn1.Unmarshal(b, &e); err != nil {
			return 0, nil, false, err
		}
		elems = append(elems, e)
	}
	var policy, plen *asn1.RawValue
	switch {
	case !draft && len(elems) == 1:
		policy = &elems[0]
	case !draft && len(elems) == 2:
		plen, policy = &elems[0], &elems[1]
		if plen.Class != asn1.ClassUniversal || plen.Tag != asn1.TagInteger {
			return 0, nil, false, errors.New("pCPathLenConstraint is not an INTEGER")
		}
	case draft && len(elems) == 1:
		policy = &elems[0]
	case draft && len(elems) == 2:
		policy = &elems[0]
		if elems[1].Class != asn1.ClassContextSpecific || elems[1].Tag != 1 {
			return 0, nil, false, errors.New("pCPathLenConstraint is not [1]")
		}
		var inner asn1.RawValue
		if rest, err := asn1.Unmarshal(elems[1].Bytes, &inner); err != nil || len(rest) > 0 || inner.Tag != asn1.TagInteger {
			return 0, nil, false, errors.New("pCPathLenConstraint is not an INTEGER")
		}
		plen = &inner
	default:
		return 0, nil, false, fmt.Errorf("%d fields", len(elems))
	}
	if plen != nil {
		var n *big.Int
		if _, err := asn1.Unmarshal(plen.FullBytes, &n); err != nil {
			return 0, nil, false, fmt.Errorf("pCPathLenConstraint: %w", err)
		}
		if n.Sign() < 0 {
			return 0, nil, false, errors.New("negative pCPathLenConstraint")
		}
		pathLen = maxChain // larger constraints limit nothing Verify accepts
		if n.IsInt64() && n.Int64() < maxChain {
			pathLen = int(n.Int64())
		}
	}
	var pp struct {
		Language asn1.ObjectIdentifier
		Policy   []byte `asn1:"optional"`
	}
	rest, err := asn1.Unmarshal(policy.FullBytes, &pp)
	if err != nil || len(rest) > 0 {
		return 0, nil, false, errors.New("malformed ProxyPolicy")
	}
	return pathLen, pp.Language, pp.Policy != nil, nil
}

// marshalPCI encodes RFC 3820's ProxyCertInfo; pathLen < 0 leaves the
// constraint out.
func marshalPCI(pathLen int, lang asn1.ObjectIdentifier) ([]byte, error) {
	pol, err := asn1.Marshal(struct{ Language asn1.ObjectIdentifier }{lang})
	if err != nil {
		return nil, err
	}
	var body []byte
	if pathLen >= 0 {
		if body, err = asn1.Marshal(pathLen); err != nil {
			return nil, err
		}
	}
	body = append(body, pol...)
	return asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: body})
}

// proxySerial is GCT's serial number of a proxy, also its CN: the first
// 31 bits (little-endian) of the SHA-1 of the public key's
// SubjectPublicKeyInfo (globus_gsi_proxy.c, globus_gsi_proxy_sign_req).
func proxySerial(pub crypto.PublicKey) (*big.Int, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	md := sha1.Sum(der)
	n := int64(md[0]) + (int64(md[1])+(int64(md[2])+int64(md[3]>>1)*256)*256)*256
	if n == 0 {
		n = 1 // x509 wants a positive serial
	}
	return big.NewInt(n), nil
}

// NewProxy makes an RFC 3820 impersonation proxy (or a limited one) for
// pub, signed by issuer's key: subject = issuer's subject + CN=<serial>,
// a critical ProxyCertInfo, the issuer's key usage without
// nonRepudiation and keyCertSign and its extended key usage (as GCT),
// NotBefore ClockSkew ago, NotAfter capped at the issuer's.
func NewProxy(issuer *Credential, pub crypto.PublicKey, o ProxyOptions) (*x509.Certificate, error) {
	return newProxy(issuer, pub, o, time.Now())
}

func newProxy(issuer *Credential, pub crypto.PublicKey, o ProxyOptions, now time.Time) (*x509.Certificate, error) {
	if issuer == nil || len(issuer.Chain) == 0 || issuer.Key == nil {
		return nil, errors.New("proxy issuer has no certificate or key")
	}
	parent := issuer.Chain[0]
	pi := classify(parent)
	switch {
	case pi.err != nil:
		return nil, fmt.Errorf("issuer: %w", pi.err)
	case pi.kind == legacyProxy || pi.kind == gsi3Proxy:
		return nil, fmt.Errorf("cannot sign an RFC 3820 proxy with a %s (GSI refuses mixed chains)", pi.kind)
	}
	if rem := remainingProxies(issuer.Chain); rem == 0 {
		return nil, errors.New("the issuer's proxy path length constraint allows no further proxy")
	}
	limited := o.Limited
	for _, c := range issuer.Chain {
		if p := classify(c); p.kind != notProxy && p.limited {
			limited = true
		}
	}
	lifetime := o.Lifetime
	if lifetime <= 0 {
		lifetime = DefaultLifetime
	}
	notAfter := now.Add(lifetime)
	if end := issuer.NotAfter(); end.Before(notAfter) {
		notAfter = end
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("the issuer expired at %s", notAfter.UTC().Format(time.RFC3339))
	}
	serial, err := proxySerial(pub)
	if err != nil {
		return nil, err
	}
	subject, err := appendCN(parent.RawSubject, serial.String())
	if err != nil {
		return nil, err
	}
	lang := OIDInheritAll
	if limited {
		lang = OIDLimitedProxy
	}
	pathLen := o.PathLen
	if pathLen < 0 {
		pathLen = -1
	}
	pci, err := marshalPCI(pathLen, lang)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:    serial,
		RawSubject:      subject,
		NotBefore:       now.Add(-ClockSkew),
		NotAfter:        notAfter,
		KeyUsage:        parent.KeyUsage &^ (x509.KeyUsageContentCommitment | x509.KeyUsageCertSign),
		ExtraExtensions: []pkix.Extension{{Id: OIDProxyCertInfo, Critical: true, Value: pci}},
	}
	for _, e := range parent.Extensions {
		if e.Id.Equal(oidExtKeyUsage) {
			tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, e)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, issuer.Key)
	if err != nil {
		return nil, fmt.Errorf("sign proxy: %w", err)
	}
	return x509.ParseCertificate(der)
}

// NewProxyCredential makes a proxy credential of issuer: a fresh key (RSA
// of the size of the issuer's, ECDSA P-256 for an ECDSA issuer, Ed25519 for
// an Ed25519 one), NewProxy for it, and the issuer's chain after it.
func NewProxyCredential(issuer *Credential, o ProxyOptions) (*Credential, error) {
	if issuer == nil || len(issuer.Chain) == 0 || issuer.Key == nil {
		return nil, errors.New("proxy issuer has no certificate or key")
	}
	var (
		key crypto.Signer
		err error
	)
	switch pub := issuer.Key.Public().(type) {
	case *rsa.PublicKey:
		key, err = rsa.GenerateKey(rand.Reader, pub.N.BitLen())
	case *ecdsa.PublicKey:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ed25519.PublicKey:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("unsupported issuer key %T", pub)
	}
	if err != nil {
		return nil, err
	}
	cert, err := NewProxy(issuer, key.Public(), o)
	if err != nil {
		return nil, err
	}
	return &Credential{Chain: append([]*x509.Certificate{cert}, issuer.Chain...), Key: key}, nil
}

// NewRequest is the acceptor's side of delegation: a new RSA key of bits
// (0: 2048, GCT's DEFAULT_KEY_BITS) and a DER PKCS#10 request for it, with
// GCT's placeholder subject CN=NULL SUBJECT NAME ENTRY.
func NewRequest(bits int) (csrDER []byte, key crypto.Signer, err error) {
	if bits == 0 {
		bits = 2048
	}
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "NULL SUBJECT NAME ENTRY"},
	}, k)
	if err != nil {
		return nil, nil, err
	}
	return csr, k, nil
}

// SignRequest is the initiator's side of delegation: it checks the
// request's self-signature and returns the DER of a proxy (NewProxy) for
// the request's key. The request's subject and extensions are ignored.
func SignRequest(issuer *Credential, csrDER []byte, o ProxyOptions) (certDER []byte, err error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("delegation request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("delegation request: bad signature: %w", err)
	}
	cert, err := NewProxy(issuer, csr.PublicKey, o)
	if err != nil {
		return nil, err
	}
	return cert.Raw, nil
}

// AcceptDelegation is the acceptor's last step: the credential of the
// proxy the initiator signed (certDER) for key, with the initiator's
// chain (leaf first, as TLS handed it) after it. Verify it with
// Trust.Verify before use.
func AcceptDelegation(certDER []byte, key crypto.Signer, peerChain []*x509.Certificate) (*Credential, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("delegated proxy: %w", err)
	}
	c := &Credential{Chain: append([]*x509.Certificate{cert}, peerChain...), Key: key}
	if err := c.checkKey(); err != nil {
		return nil, fmt.Errorf("delegated proxy: %w", err)
	}
	if len(peerChain) > 0 && !bytes.Equal(cert.RawIssuer, peerChain[0].RawSubject) {
		return nil, errors.New("delegated proxy: not issued by the peer's certificate")
	}
	return c, nil
}

// remainingProxies is how many more proxies the chain's path length
// constraints allow below its leaf; -1 for no limit.
func remainingProxies(chain []*x509.Certificate) int {
	rem := -1
	for i := len(chain) - 1; i >= 0; i-- {
		pi := classify(chain[i])
		if pi.kind == notProxy {
			continue
		}
		if rem > 0 {
			rem--
		}
		if pi.pathLen >= 0 && (rem < 0 || pi.pathLen < rem) {
			rem = pi.pathLen
		}
	}
	return rem
}

// proxyCN is the decimal CN of an RFC 3820 proxy made for pub (for tests
// and messages).
func proxyCN(pub crypto.PublicKey) string {
	n, err := proxySerial(pub)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(n.Int64(), 10)
}
