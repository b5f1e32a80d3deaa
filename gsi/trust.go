package gsi

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxChain is the longest chain Verify accepts, proxies and CAs included.
const maxChain = 10

// Trust is the CAs (and their CRLs) a party accepts. One loaded from
// directories (LoadCADir, WithCRLDir) reads them again when their files
// change, looking at most once a minute: a long-running server sees the
// CRLs fetch-crl renews, and CAs added or removed, without a restart.
type Trust struct {
	// Problems lists the files of a CA directory that LoadCADir could not
	// read; the others were loaded. A caller logs them.
	Problems []error

	mu      sync.Mutex
	cur     *anchors
	caDir   string   // "" for NewTrust's
	crlDirs []string // WithCRLDir's
	stamp   string   // the directories' files when cur was read
	checked time.Time
}

// anchors is what a Trust holds at one time.
type anchors struct {
	roots []*x509.Certificate
	pool  *x509.CertPool
	crls  []*x509.RevocationList
}

// recheck is how often a Trust of directories looks for changes.
const recheck = time.Minute

// NewTrust trusts roots (the trust anchors, usually self-signed CAs) and
// applies crls, each to the certificates its issuer signed.
func NewTrust(roots []*x509.Certificate, crls []*x509.RevocationList) *Trust {
	return &Trust{cur: newAnchors(roots, crls)}
}

func newAnchors(roots []*x509.Certificate, crls []*x509.RevocationList) *anchors {
	a := &anchors{pool: x509.NewCertPool(), crls: crls}
	seen := map[[32]byte]bool{}
	for _, r := range roots {
		if r == nil {
			continue
		}
		h := sha256.Sum256(r.Raw)
		if seen[h] {
			continue
		}
		seen[h] = true
		a.roots = append(a.roots, r)
		a.pool.AddCert(r)
	}
	return a
}

// Roots returns the trusted CA certificates.
func (t *Trust) Roots() []*x509.Certificate { return t.at(time.Now()).roots }

// CertPool returns the roots as a pool, for crypto/tls's ClientCAs (the
// names a server sends in its CertificateRequest).
func (t *Trust) CertPool() *x509.CertPool { return t.at(time.Now()).pool.Clone() }

// LoadCADir loads an OpenSSL hashed CA directory such as
// /etc/grid-security/certificates: every file named <hash>.0 .. <hash>.9
// holds PEM CA certificates, every <hash>.r0 .. <hash>.r9 PEM CRLs. The
// name's hash is not checked (a file misnamed is still loaded). GCT's
// *.signing_policy and *.namespaces files are ignored: ferry trusts each
// CA for any subject, as GCT does with its signing policy check off.
// Files that do not parse are listed in Trust.Problems; a directory with
// no CA at all is an error.
func LoadCADir(dir string) (*Trust, error) {
	return loadDirs(dir, nil, time.Now())
}

// WithCRLDir is t with the CRLs of another hashed directory too (its
// <hash>.r0 .. <hash>.r9 files; CA certificates there are not trusted):
// a CRL directory kept apart from the CAs'.
func (t *Trust) WithCRLDir(dir string) (*Trust, error) {
	if t.caDir == "" {
		a := t.at(time.Now())
		_, crls, problems, err := readHashedDir(dir)
		if err != nil {
			return nil, fmt.Errorf("CRL directory: %w", err)
		}
		n := NewTrust(a.roots, append(slices.Clone(a.crls), crls...))
		n.Problems = append(slices.Clone(t.Problems), problems...)
		return n, nil
	}
	return loadDirs(t.caDir, append(slices.Clone(t.crlDirs), dir), time.Now())
}

// loadDirs reads a CA directory and CRL directories into a Trust that
// follows them.
func loadDirs(caDir string, crlDirs []string, now time.Time) (*Trust, error) {
	stamp := dirStamp(caDir, crlDirs)
	a, problems, err := readDirs(caDir, crlDirs)
	if err != nil {
		return nil, err
	}
	return &Trust{Problems: problems, cur: a, caDir: caDir, crlDirs: crlDirs, stamp: stamp, checked: now}, nil
}

// readDirs reads the anchors of a CA directory and CRL directories.
func readDirs(caDir string, crlDirs []string) (*anchors, []error, error) {
	roots, crls, problems, err := readHashedDir(caDir)
	if err != nil {
		return nil, nil, fmt.Errorf("CA directory: %w", err)
	}
	if len(roots) == 0 {
		return nil, nil, fmt.Errorf("CA directory %s has no CA certificate (<hash>.0 files)%s", caDir, problemSuffix(problems))
	}
	for _, d := range crlDirs {
		_, more, p, err := readHashedDir(d)
		if err != nil {
			return nil, nil, fmt.Errorf("CRL directory: %w", err)
		}
		crls, problems = append(crls, more...), append(problems, p...)
	}
	return newAnchors(roots, crls), problems, nil
}

// at is what t trusts at now: for a Trust of directories, read again
// when their files changed since it last looked (at most once a
// minute). A directory that no longer loads (gone, or no CA left in it)
// leaves the last good reading in force.
func (t *Trust) at(now time.Time) *anchors {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.caDir == "" || now.Sub(t.checked) < recheck {
		return t.cur
	}
	t.checked = now
	if stamp := dirStamp(t.caDir, t.crlDirs); stamp != t.stamp {
		if a, _, err := readDirs(t.caDir, t.crlDirs); err == nil {
			t.cur, t.stamp = a, stamp
		}
	}
	return t.cur
}

// dirStamp sums up the hashed files of the directories: names, sizes and
// modification times.
func dirStamp(caDir string, crlDirs []string) string {
	var b strings.Builder
	for _, dir := range append([]string{caDir}, crlDirs...) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", dir, err)
			continue
		}
		for _, e := range ents {
			if !hashedName(e.Name()) {
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, e.Name())) // through symlinks
			if err != nil {
				fmt.Fprintf(&b, "%s: %v\n", e.Name(), err)
				continue
			}
			fmt.Fprintf(&b, "%s/%s %d %d\n", dir, e.Name(), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// hashedName reports a <hash>.N or <hash>.rN file name.
func hashedName(name string) bool {
	ext := filepath.Ext(name)
	isCert := len(ext) == 2 && ext[1] >= '0' && ext[1] <= '9'
	isCRL := len(ext) == 3 && ext[1] == 'r' && ext[2] >= '0' && ext[2] <= '9'
	return (isCert || isCRL) && len(name) > len(ext)
}

// readHashedDir reads an OpenSSL hashed directory: the certificates of
// its <hash>.N files and the CRLs of its <hash>.rN files, and what would
// not parse.
func readHashedDir(dir string) (roots []*x509.Certificate, crls []*x509.RevocationList, problems []error, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !hashedName(name) {
			continue
		}
		isCert := len(filepath.Ext(name)) == 2
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p) // follows the usual symlinks to *.pem
		if err != nil {
			problems = append(problems, err)
			continue
		}
		n := 0
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			switch {
			case isCert && (blk.Type == "CERTIFICATE" || blk.Type == "TRUSTED CERTIFICATE"):
				c, err := x509.ParseCertificate(blk.Bytes)
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", p, err))
					continue
				}
				roots = append(roots, c)
				n++
			case !isCert && blk.Type == "X509 CRL":
				crl, err := x509.ParseRevocationList(blk.Bytes)
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", p, err))
					continue
				}
				crls = append(crls, crl)
				n++
			}
		}
		if n == 0 {
			problems = append(problems, fmt.Errorf("%s: no PEM %s", p, map[bool]string{true: "certificate", false: "CRL"}[isCert]))
		}
	}
	return roots, crls, problems, nil
}

func problemSuffix(p []error) string {
	if len(p) == 0 {
		return ""
	}
	return ": " + errors.Join(p...).Error()
}

// Identity is who a verified chain speaks for.
type Identity struct {
	// DN is the end-entity certificate's subject in one-line form.
	DN string
	// Chain is the chain as given, leaf first.
	Chain []*x509.Certificate
	// Limited is true when a proxy of the chain is limited.
	Limited bool
	// NotAfter is the earliest NotAfter of the chain.
	NotAfter time.Time
}

// VerifyError is why Verify refused a chain. Cert is the index in the
// chain of the certificate at fault (0 = leaf), -1 for the chain itself.
type VerifyError struct {
	Cert    int
	Subject string
	Msg     string
	Err     error // the x509 error, if any
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	b.WriteString("certificate chain refused: ")
	if e.Cert >= 0 {
		fmt.Fprintf(&b, "certificate %d %q: ", e.Cert, e.Subject)
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *VerifyError) Unwrap() error { return e.Err }

func refuse(chain []*x509.Certificate, i int, format string, a ...any) *VerifyError {
	e := &VerifyError{Cert: i, Msg: fmt.Sprintf(format, a...)}
	if i >= 0 && i < len(chain) {
		e.Subject = oneLineOrHex(chain[i].RawSubject)
	}
	return e
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// Verify checks a peer's chain (leaf first, as TLS hands it) at now and
// returns who it is. The end-entity certificate is the first that is no
// proxy (RFC 3820, GSI 3 draft or legacy GT2 proxy); it must chain to a
// root with the chain's other certificates as intermediates, and neither
// it nor a CA on its path may be revoked by a CRL of the Trust. Every
// proxy above it must be signed by the certificate after it, be named as
// its issuer plus one CN, be valid at now, sign no certificates, keep the
// path length constraints of the proxies above it and be limited if one
// above it is. Independent and restricted (policy-carrying) proxies are
// refused: they do not speak for the end entity, and ferry has no policy
// engine.
func (t *Trust) Verify(chain []*x509.Certificate, now time.Time) (*Identity, error) {
	if len(chain) == 0 {
		return nil, refuse(chain, -1, "no certificate")
	}
	if len(chain) > maxChain {
		return nil, refuse(chain, -1, "%d certificates, more than the %d accepted", len(chain), maxChain)
	}
	for i, c := range chain {
		if c == nil {
			return nil, refuse(chain, -1, "certificate %d is missing", i)
		}
	}
	infos := make([]proxyInfo, len(chain))
	eec := -1
	for i, c := range chain {
		infos[i] = classify(c)
		if infos[i].kind == notProxy {
			eec = i
			break
		}
	}
	if eec < 0 {
		return nil, refuse(chain, -1, "no end-entity certificate: every certificate is a proxy")
	}
	if err := t.at(now).verifyEEC(chain, eec, now); err != nil {
		return nil, err
	}
	id := &Identity{Chain: chain, NotAfter: earliestNotAfter(chain)}
	var err error
	if id.DN, err = OneLine(chain[eec].RawSubject); err != nil {
		return nil, refuse(chain, eec, "subject: %v", err)
	}
	// The proxies, from the one the end entity signed down to the leaf.
	maxDepth := -1 // proxies allowed below the end entity; -1: no limit
	for i := eec - 1; i >= 0; i-- {
		depth := eec - i
		p, issuer, pi, above := chain[i], chain[i+1], infos[i], infos[i+1]
		if pi.err != nil {
			return nil, refuse(chain, i, "%v", pi.err)
		}
		if i < eec-1 && pi.kind != above.kind {
			return nil, refuse(chain, i, "a %s signed by a %s: GSI does not mix proxy kinds", pi.kind, above.kind)
		}
		if pi.kind != legacyProxy && !pi.critical {
			return nil, refuse(chain, i, "its ProxyCertInfo extension is not critical")
		}
		if err := checkSignedBy(p, issuer); err != nil {
			return nil, refuse(chain, i, "proxy %d not signed by its issuer %q: %v", depth, oneLineOrHex(issuer.RawSubject), err)
		}
		if !bytes.Equal(p.RawIssuer, issuer.RawSubject) {
			return nil, refuse(chain, i, "its issuer name %q is not the subject of the next certificate, %q", oneLineOrHex(p.RawIssuer), oneLineOrHex(issuer.RawSubject))
		}
		if cn, err := extendsByCN(p.RawSubject, issuer.RawSubject); err != nil {
			return nil, refuse(chain, i, "subject is not its issuer's subject plus one CN: %v", err)
		} else if pi.kind == legacyProxy && cn != "proxy" && cn != "limited proxy" {
			return nil, refuse(chain, i, "legacy proxy named CN=%q", cn)
		}
		if now.Before(p.NotBefore) {
			return nil, refuse(chain, i, "not yet valid until %s (now %s)", stamp(p.NotBefore), stamp(now))
		}
		if now.After(p.NotAfter) {
			return nil, refuse(chain, i, "expired at %s (now %s)", stamp(p.NotAfter), stamp(now))
		}
		if p.KeyUsage&x509.KeyUsageCertSign != 0 || p.BasicConstraintsValid && p.IsCA {
			return nil, refuse(chain, i, "a proxy may not be a CA or have keyCertSign")
		}
		if issuer.KeyUsage != 0 && issuer.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
			return nil, refuse(chain, i+1, "its key usage lacks digitalSignature, so it may not sign a proxy")
		}
		if len(p.DNSNames)+len(p.EmailAddresses)+len(p.IPAddresses)+len(p.URIs) > 0 {
			return nil, refuse(chain, i, "a proxy may not have a subjectAltName")
		}
		for _, oid := range p.UnhandledCriticalExtensions {
			if !oid.Equal(OIDProxyCertInfo) && !oid.Equal(OIDProxyCertInfoGSI3) {
				return nil, refuse(chain, i, "unknown critical extension %s", oid)
			}
		}
		switch {
		case pi.kind == legacyProxy:
		case pi.language.Equal(OIDIndependent):
			return nil, refuse(chain, i, "an independent proxy does not carry its issuer's identity; ferry does not accept it")
		case !pi.language.Equal(OIDInheritAll) && !pi.limited:
			return nil, refuse(chain, i, "restricted proxy (policy language %s): ferry does not support proxy policies", pi.language)
		case pi.hasPolicy:
			return nil, refuse(chain, i, "a proxy policy is not supported")
		}
		if maxDepth >= 0 && depth > maxDepth {
			return nil, refuse(chain, i, "path length exceeded: the proxies above allow %d proxies below the end-entity certificate, this is proxy %d", maxDepth, depth)
		}
		if pi.pathLen >= 0 && (maxDepth < 0 || depth+pi.pathLen < maxDepth) {
			maxDepth = depth + pi.pathLen
		}
		if id.Limited && !pi.limited {
			return nil, refuse(chain, i, "a full proxy signed by a limited proxy")
		}
		id.Limited = id.Limited || pi.limited
	}
	return id, nil
}

// checkSignedBy checks the proxy's signature with its issuer's key; x509's
// CheckSignatureFrom would refuse an issuer that is no CA.
func checkSignedBy(p, issuer *x509.Certificate) error {
	return issuer.CheckSignature(p.SignatureAlgorithm, p.RawTBSCertificate, p.Signature)
}

// extendsByCN checks that subject is issuer followed by exactly one RDN of
// one CN attribute, and returns that CN.
func extendsByCN(subject, issuer []byte) (string, error) {
	s, err := parseName(subject)
	if err != nil {
		return "", err
	}
	is, err := parseName(issuer)
	if err != nil {
		return "", err
	}
	if len(s) != len(is)+1 {
		return "", fmt.Errorf("%d RDNs under an issuer of %d", len(s), len(is))
	}
	for k := range is {
		if len(s[k]) != len(is[k]) {
			return "", fmt.Errorf("RDN %d differs", k)
		}
		for j := range is[k] {
			if !s[k][j].Type.Equal(is[k][j].Type) || !bytes.Equal(s[k][j].Value.FullBytes, is[k][j].Value.FullBytes) {
				return "", fmt.Errorf("RDN %d differs", k)
			}
		}
	}
	last := s[len(s)-1]
	if len(last) != 1 || !last[0].Type.Equal(oidCommonName) {
		return "", errors.New("the last RDN is not a single CN")
	}
	return string(last[0].Value.Bytes), nil
}

// verifyEEC checks the end-entity certificate chain[eec] up to a root.
func (t *anchors) verifyEEC(chain []*x509.Certificate, eec int, now time.Time) error {
	c := chain[eec]
	if now.Before(c.NotBefore) {
		return refuse(chain, eec, "not yet valid until %s (now %s)", stamp(c.NotBefore), stamp(now))
	}
	if now.After(c.NotAfter) {
		return refuse(chain, eec, "expired at %s (now %s)", stamp(c.NotAfter), stamp(now))
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[eec+1:] {
		inter.AddCert(ic)
	}
	paths, err := c.Verify(x509.VerifyOptions{
		Roots:         t.pool,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		var ua x509.UnknownAuthorityError
		var ci x509.CertificateInvalidError
		switch {
		case errors.As(err, &ua):
			e := refuse(chain, eec, "unknown CA %q: no trusted CA certificate issued it", oneLineOrHex(issuerOf(chain, eec, ua.Cert)))
			e.Err = err
			return e
		case errors.As(err, &ci) && ci.Reason == x509.Expired:
			e := refuse(chain, eec, "a CA certificate on its path is expired or not yet valid: %v", err)
			e.Err = err
			return e
		}
		e := refuse(chain, eec, "%v", err)
		e.Err = err
		return e
	}
	return t.checkRevoked(chain, eec, paths, now)
}

// issuerOf names the issuer that could not be found: that of the
// certificate x509 stopped at, else of the end entity.
func issuerOf(chain []*x509.Certificate, eec int, at *x509.Certificate) []byte {
	if at != nil {
		return at.RawIssuer
	}
	return chain[eec].RawIssuer
}

// checkRevoked checks each certificate of the verified path but the root
// against the CRLs from its issuer. A path passes when no
// certificate on it is revoked; the first path x509 found is reported.
func (t *anchors) checkRevoked(chain []*x509.Certificate, eec int, paths [][]*x509.Certificate, now time.Time) error {
	var first error
	for _, path := range paths {
		err := t.checkPathRevoked(chain, eec, path, now)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (t *anchors) checkPathRevoked(chain []*x509.Certificate, eec int, path []*x509.Certificate, now time.Time) error {
	for k := 0; k+1 < len(path); k++ {
		c, issuer := path[k], path[k+1]
		for _, crl := range t.crls {
			if !bytes.Equal(crl.RawIssuer, issuer.RawSubject) {
				continue
			}
			ca := oneLineOrHex(issuer.RawSubject)
			if err := crl.CheckSignatureFrom(issuer); err != nil {
				return refuse(chain, eec, "the CRL of CA %q has a bad signature: %v", ca, err)
			}
			if now.Before(crl.ThisUpdate) {
				return refuse(chain, eec, "the CRL of CA %q is not yet valid until %s", ca, stamp(crl.ThisUpdate))
			}
			if !crl.NextUpdate.IsZero() && now.After(crl.NextUpdate) {
				return refuse(chain, eec, "the CRL of CA %q expired at %s (update it, e.g. with fetch-crl)", ca, stamp(crl.NextUpdate))
			}
			for _, r := range crl.RevokedCertificateEntries {
				if r.SerialNumber != nil && r.SerialNumber.Cmp(c.SerialNumber) == 0 {
					who := "it"
					if k > 0 {
						who = fmt.Sprintf("its CA %q", oneLineOrHex(c.RawSubject))
					}
					return refuse(chain, eec, "%s (serial %s) was revoked at %s by CA %q", who, c.SerialNumber, stamp(r.RevocationTime), ca)
				}
			}
		}
	}
	return nil
}
