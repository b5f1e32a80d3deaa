package gsi

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"strings"
)

// shortNames are OpenSSL's short names (OBJ_nid2sn) of the attribute types
// seen in grid DNs; an attribute not listed is written as its dotted OID,
// as OpenSSL does for an OID it does not know.
var shortNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.4":                    "SN",
	"2.5.4.5":                    "serialNumber",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "street",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.12":                   "title",
	"2.5.4.13":                   "description",
	"2.5.4.14":                   "searchGuide",
	"2.5.4.15":                   "businessCategory",
	"2.5.4.16":                   "postalAddress",
	"2.5.4.17":                   "postalCode",
	"2.5.4.18":                   "postOfficeBox",
	"2.5.4.20":                   "telephoneNumber",
	"2.5.4.41":                   "name",
	"2.5.4.42":                   "GN",
	"2.5.4.43":                   "initials",
	"2.5.4.44":                   "generationQualifier",
	"2.5.4.45":                   "x500UniqueIdentifier",
	"2.5.4.46":                   "dnQualifier",
	"2.5.4.51":                   "houseIdentifier",
	"2.5.4.65":                   "pseudonym",
	"2.5.4.72":                   "role",
	"2.5.4.97":                   "organizationIdentifier",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
	"1.2.840.113549.1.9.1":       "emailAddress",
	"1.2.840.113549.1.9.2":       "unstructuredName",
	"1.2.840.113549.1.9.8":       "unstructuredAddress",
	"1.3.6.1.4.1.311.60.2.1.1":   "jurisdictionL",
	"1.3.6.1.4.1.311.60.2.1.2":   "jurisdictionST",
	"1.3.6.1.4.1.311.60.2.1.3":   "jurisdictionC",
}

// attribute is one AttributeTypeAndValue with its value left raw, so that
// OneLine writes the bytes of any string type as OpenSSL does.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// maxNameAttributes bounds the work on a hostile name.
const maxNameAttributes = 256

// parseName splits a DER Name into its RDNs, each a set of attributes.
func parseName(der []byte) ([][]attribute, error) {
	var seq asn1.RawValue
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	if len(rest) > 0 || seq.Class != asn1.ClassUniversal || seq.Tag != asn1.TagSequence || !seq.IsCompound {
		return nil, errors.New("name: not a DER SEQUENCE")
	}
	var rdns [][]attribute
	n := 0
	for b := seq.Bytes; len(b) > 0; {
		var set asn1.RawValue
		if b, err = asn1.Unmarshal(b, &set); err != nil {
			return nil, fmt.Errorf("name: %w", err)
		}
		if set.Class != asn1.ClassUniversal || set.Tag != asn1.TagSet || !set.IsCompound || len(set.Bytes) == 0 {
			return nil, errors.New("name: an RDN is not a non-empty SET")
		}
		var rdn []attribute
		for s := set.Bytes; len(s) > 0; {
			var a attribute
			if s, err = asn1.Unmarshal(s, &a); err != nil {
				return nil, fmt.Errorf("name: %w", err)
			}
			if n++; n > maxNameAttributes {
				return nil, errors.New("name: too many attributes")
			}
			rdn = append(rdn, a)
		}
		rdns = append(rdns, rdn)
	}
	return rdns, nil
}

// OneLine writes a DER Name (a certificate's RawSubject or RawIssuer) in the
// form of OpenSSL 3's X509_NAME_oneline, which GCT uses for identities and
// grid-mapfile lookups: "/C=US/O=Grid/CN=Alice". RDNs come in DER order,
// members of a multi-valued RDN are joined by "+", attribute types by
// OpenSSL's short names, and each value's raw bytes are written with "/"
// and "+" escaped by a backslash and bytes outside ' '..'~' as \xHH (so a
// UTF-8 "é" is "\xC3\xA9"; a BMPString keeps its zero bytes as "\x00").
// OpenSSL 1.x neither escaped "/" and "+" nor joined with "+"; names
// without those characters and without multi-valued RDNs read the same.
func OneLine(rawName []byte) (string, error) {
	rdns, err := parseName(rawName)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, rdn := range rdns {
		for i, a := range rdn {
			if i == 0 {
				b.WriteByte('/')
			} else {
				b.WriteByte('+')
			}
			oid := a.Type.String()
			if sn, ok := shortNames[oid]; ok {
				b.WriteString(sn)
			} else {
				b.WriteString(oid)
			}
			b.WriteByte('=')
			writeOneLineValue(&b, a.Value)
		}
	}
	return b.String(), nil
}

// writeOneLineValue writes one value's bytes as X509_NAME_oneline does,
// including its special case of a GeneralString holding 4-byte characters.
func writeOneLineValue(b *strings.Builder, v asn1.RawValue) {
	const hex = "0123456789ABCDEF"
	q := v.Bytes
	keep := [4]bool{true, true, true, true}
	if v.Class == asn1.ClassUniversal && v.Tag == asn1.TagGeneralString && len(q)%4 == 0 {
		var nonzero [4]bool
		for j, c := range q {
			if c != 0 {
				nonzero[j&3] = true
			}
		}
		if !(nonzero[0] || nonzero[1] || nonzero[2]) {
			keep = [4]bool{false, false, false, true}
		}
	}
	for j, c := range q {
		if !keep[j&3] {
			continue
		}
		switch {
		case c < ' ' || c > '~':
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		case c == '/' || c == '+':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
}

var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// appendCN returns the DER Name of name with one more RDN, CN=cn, as GCT
// names a proxy (globus_gsi_proxy.c, globus_i_gsi_proxy_set_subject). The
// issuer's RDNs are kept byte for byte.
func appendCN(name []byte, cn string) ([]byte, error) {
	var seq asn1.RawValue
	if rest, err := asn1.Unmarshal(name, &seq); err != nil || len(rest) > 0 {
		return nil, errors.New("issuer subject is not a DER Name")
	}
	rdn, err := asn1.MarshalWithParams([]attribute{{Type: oidCommonName, Value: printable(cn)}}, "set")
	if err != nil {
		return nil, err
	}
	seq.FullBytes = nil
	seq.Bytes = append(append([]byte(nil), seq.Bytes...), rdn...)
	return asn1.Marshal(seq)
}

func printable(s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagPrintableString, Bytes: []byte(s)}
}
