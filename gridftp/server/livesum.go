package server

import (
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	"ferry/checksum"
)

// Live checksums: after "OPTS CKSM Live=ALG;" a session hashes the data of
// each MODE E transfer while it moves — the sender as it reads blocks, when
// one stream reads them in order; the receiver as it writes them, reading
// back what it wrote (blocks that arrive ahead of a gap once the gap fills,
// so any number of streams will do) — and a later CKSM of exactly that
// range is answered from memory instead of reading the file again. Any
// change to the file through the server forgets what it overlaps.
// Integrity then costs one pass over the data, spread across the transfers
// in flight.

// sumKey is one checksummed range of a file.
type sumKey struct {
	path   string
	off, n int64
	alg    string
}

// maxLiveSums bounds the cache; past it, the oldest half is forgotten.
const maxLiveSums = 4096

// sumCache remembers checksums computed while data moved.
type sumCache struct {
	mu    sync.Mutex
	sums  map[sumKey]string
	order []sumKey
}

func (c *sumCache) put(k sumKey, sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sums == nil {
		c.sums = map[sumKey]string{}
	}
	if len(c.order) >= maxLiveSums {
		for _, old := range c.order[:maxLiveSums/2] {
			delete(c.sums, old)
		}
		c.order = append([]sumKey(nil), c.order[maxLiveSums/2:]...)
	}
	c.sums[k] = sum
	c.order = append(c.order, k)
}

func (c *sumCache) get(k sumKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sums[k]
	return s, ok
}

// forget drops what is known of p (a file, or a directory and everything
// below it) in the range [off, off+n); n < 0 means from off to the end,
// so that a transfer into one chunk of a file (ESTO, APPE, a restart) or
// SITE TRNC keeps the sums of the chunks before it: the engine's chunks of
// one file land concurrently, each checked once its own data is in.
func (c *sumCache) forget(p string, off, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.sums {
		if k.path != p && !strings.HasPrefix(k.path, path.Clean(p)+"/") {
			continue
		}
		if n < 0 && (k.off >= off || k.off+k.n > off) || n >= 0 && k.off < off+n && off < k.off+k.n {
			delete(c.sums, k)
		}
	}
}

// hashingReader hashes what the sending streams read. It is a
// gridftp.OrderedReaderAt: the streams read the plan's blocks one at a
// time, in order, so that the hash sees the range in file order.
type hashingReader struct {
	io.ReaderAt
	h      hash.Hash
	next   int64
	broken bool
}

func (r *hashingReader) ReadsInOrder() {}

// fileHasher is a hashingReader of a plain file: a gridftp.FileSummer,
// whose blocks go out by sendfile once hashed.
type fileHasher struct {
	*hashingReader
	f *os.File
}

func (r fileHasher) SumFile() *os.File { return r.f }

// hashing returns a hashingReader of f from next on with h, and what the
// streams should read: the reader, or a fileHasher when f is a plain file.
func hashing(f io.ReaderAt, h hash.Hash, next int64) (*hashingReader, io.ReaderAt) {
	r := &hashingReader{ReaderAt: f, h: h, next: next}
	if of, ok := f.(*os.File); ok {
		return r, fileHasher{r, of}
	}
	return r, r
}

// Take hashes [off, off+n) of the file through p.
func (r *hashingReader) Take(p []byte, off, n int64) error {
	for n > 0 {
		k := min(int64(len(p)), n)
		m, err := r.ReadAt(p[:k], off)
		if int64(m) != k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func (r *hashingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.ReaderAt.ReadAt(p, off)
	if off != r.next {
		r.broken = true
	} else if !r.broken {
		r.h.Write(p[:n])
		r.next += int64(n)
	}
	return n, err
}

// liveHash returns a fresh hash of the session's live algorithm, or nil.
func (ss *session) liveHash() hash.Hash {
	if ss.liveAlg == "" {
		return nil
	}
	h, err := checksum.New(ss.liveAlg)
	if err != nil {
		return nil
	}
	return h
}

// remember stores a live checksum of [off, off+n) of p.
func (ss *session) remember(p string, off, n int64, h hash.Hash) {
	ss.srv.sums.put(sumKey{path: p, off: off, n: n, alg: ss.liveAlg}, hex.EncodeToString(h.Sum(nil)))
}
