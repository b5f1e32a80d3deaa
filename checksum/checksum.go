// Package checksum names the checksum algorithms ferry speaks, by the names
// GridFTP uses for them (CKSM, OPTS CKSM, the FEAT line), and computes the
// digests of byte ranges in the form GridFTP servers report them.
//
// Names are looked up case-insensitively; their canonical form is upper
// case. Every digest is written as lowercase hex of the hash's bytes, which
// matches the Globus GridFTP server (GCT):
//
//   - MD5, SHA1, SHA256, SHA512: the usual digests (32, 40, 64, 128 digits).
//   - ADLER32: the 32-bit value as 8 hex digits (zero-padded, as "%08x").
//   - CRC32C: CRC-32 with the Castagnoli polynomial, 8 hex digits.
//   - XXH128: XXH3 128-bit with seed 0 (github.com/zeebo/xxh3), 32 hex
//     digits: the 128-bit value big-endian, the high 64 bits then the low
//     64 bits. This is the form xxhsum -H2 (XXH128) prints. A fast hash for
//     when both ends are ferry; not an interoperable GridFTP name.
package checksum

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
)

// ErrUnknown is wrapped by the error for a name no algorithm has.
var ErrUnknown = errors.New("unknown checksum algorithm")

// Canonical names.
const (
	MD5     = "MD5"
	ADLER32 = "ADLER32"
	SHA1    = "SHA1"
	SHA256  = "SHA256"
	SHA512  = "SHA512"
	CRC32C  = "CRC32C"
	XXH128  = "XXH128"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// algorithms in the order a FEAT line lists them.
var algorithms = [...]struct {
	name string
	new  func() hash.Hash
}{
	{MD5, md5.New},
	{ADLER32, func() hash.Hash { return adler32.New() }},
	{SHA1, sha1.New},
	{SHA256, sha256.New},
	{SHA512, sha512.New},
	{CRC32C, func() hash.Hash { return crc32.New(castagnoli) }},
	{XXH128, func() hash.Hash { return xxh3.New128() }},
}

// Names returns the canonical names of all algorithms, in the order a FEAT
// line should list them: MD5, ADLER32, SHA1, SHA256, SHA512, CRC32C, XXH128.
func Names() []string {
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = a.name
	}
	return names
}

// Canonical returns the canonical (upper-case) name of the algorithm called
// name in any case.
func Canonical(name string) (string, error) {
	for _, a := range algorithms {
		if strings.EqualFold(a.name, name) {
			return a.name, nil
		}
	}
	return "", fmt.Errorf("checksum %q: %w", name, ErrUnknown)
}

// New returns a new hash for the algorithm called name in any case.
func New(name string) (hash.Hash, error) {
	for _, a := range algorithms {
		if strings.EqualFold(a.name, name) {
			return a.new(), nil
		}
	}
	return nil, fmt.Errorf("checksum %q: %w", name, ErrUnknown)
}

// bufSize is the size of the blocks Sum reads.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, bufSize)
	return &b
}}

// Sum returns the lowercase hex digest, with the algorithm called name, of
// length bytes of r starting at off. A length of -1 means up to the end of
// the data (an empty range if off is at or past the end). A range that ends
// past the end of the data is an error wrapping io.ErrUnexpectedEOF. Sum
// checks ctx between blocks of 1 MiB.
func Sum(ctx context.Context, r io.ReaderAt, off, length int64, name string) (string, error) {
	h, err := New(name)
	if err != nil {
		return "", err
	}
	if off < 0 || length < -1 {
		return "", fmt.Errorf("checksum: invalid range %d+%d", off, length)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	start, want := off, length
	for length != 0 {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		p := buf
		if length > 0 && length < int64(len(p)) {
			p = p[:length]
		}
		n, err := r.ReadAt(p, off)
		h.Write(p[:n])
		off += int64(n)
		if length > 0 {
			length -= int64(n)
		}
		switch {
		case err == io.EOF:
			if length > 0 {
				return "", fmt.Errorf("checksum: range %d+%d: data ends at %d: %w", start, want, off, io.ErrUnexpectedEOF)
			}
			length = 0
		case err != nil:
			return "", fmt.Errorf("checksum: read at %d: %w", off, err)
		case n == 0:
			return "", fmt.Errorf("checksum: read at %d: %w", off, io.ErrNoProgress)
		}
	}
	var sum [sha512.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}
