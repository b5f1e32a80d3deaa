package checksum_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"

	"ferry/checksum"
)

const fox = "The quick brown fox jumps over the lazy dog"

// Expected values from md5sum, sha*sum, Python's zlib.adler32 and a bitwise
// CRC-32C; "123456789" is the CRC catalogue's check input.
var vectors = []struct {
	name, in, want string
}{
	{"MD5", "", "d41d8cd98f00b204e9800998ecf8427e"},
	{"MD5", "hello world", "5eb63bbbe01eeed093cb22bb8f5acdc3"},
	{"MD5", fox, "9e107d9d372bb6826bd81d3542a419d6"},
	{"ADLER32", "", "00000001"},
	{"ADLER32", "hello world", "1a0b045d"},
	{"ADLER32", "123456789", "091e01de"},
	{"ADLER32", fox, "5bdc0fda"},
	{"SHA1", "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
	{"SHA1", "hello world", "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"},
	{"SHA1", fox, "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"},
	{"SHA256", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	{"SHA256", "hello world", "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"},
	{"SHA256", fox, "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"},
	{"SHA512", "", "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"},
	{"SHA512", "hello world", "309ecc489c12d6eb4cc40f50c902f2b4d0ed77ee511a7c7a9bcd3ca86d4cd86f989dd35bc5ff499670da34255b45b0cfd830e81f605dcf7dc5542e93ae9cd76f"},
	{"SHA512", fox, "07e547d9586f6a73f73fbac0435ed76951218fb7d0c8d788a309d785436bbb642e93a252a954f23912547d1e8a3b5ed6e1bfd7097821233fa0538f3db854fee6"},
	{"CRC32C", "", "00000000"},
	{"CRC32C", "hello world", "c99465aa"},
	{"CRC32C", "123456789", "e3069283"},
	{"CRC32C", fox, "22620404"},
	{"XXH128", "", "99aa06d3014798d86001c324468d497f"},
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(fmt.Sprintf("%s/%q", v.name, v.in), func(t *testing.T) {
			h, err := checksum.New(v.name)
			if err != nil {
				t.Fatal(err)
			}
			h.Write([]byte(v.in))
			if got := hex.EncodeToString(h.Sum(nil)); got != v.want {
				t.Errorf("New().Sum = %s, want %s", got, v.want)
			}
			got, err := checksum.Sum(t.Context(), bytes.NewReader([]byte(v.in)), 0, -1, v.name)
			if err != nil || got != v.want {
				t.Errorf("Sum = %s, %v; want %s", got, err, v.want)
			}
		})
	}
}

func TestXXH128(t *testing.T) {
	data := make([]byte, 3<<20+7)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	// Lengths around XXH3's internal boundaries and Sum's 1 MiB blocks.
	for _, n := range []int{0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 1 << 20, 1<<20 + 1, len(data)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := xxh3.Hash128(data[:n]).Bytes()
			wantHex := hex.EncodeToString(want[:])

			// Streaming in odd pieces.
			h, err := checksum.New("xxh128")
			if err != nil {
				t.Fatal(err)
			}
			for p := data[:n]; len(p) > 0; {
				k := min(len(p), 1000003)
				h.Write(p[:k])
				p = p[k:]
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != wantHex {
				t.Errorf("streaming = %s, want %s", got, wantHex)
			}
			if h.Size() != 16 {
				t.Errorf("Size = %d, want 16", h.Size())
			}

			got, err := checksum.Sum(t.Context(), bytes.NewReader(data[:n]), 0, -1, "XXH128")
			if err != nil || got != wantHex {
				t.Errorf("Sum = %s, %v; want %s", got, err, wantHex)
			}
		})
	}
	// Byte order: high 64 bits first, each big-endian.
	v := xxh3.HashString128("hello world")
	want := fmt.Sprintf("%016x%016x", v.Hi, v.Lo)
	if got, _ := checksum.Sum(t.Context(), bytes.NewReader([]byte("hello world")), 0, -1, "XXH128"); got != want {
		t.Errorf("XXH128(hello world) = %s, want %s (hi, lo)", got, want)
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		in, want string // want "" for unknown
	}{
		{"MD5", "MD5"},
		{"md5", "MD5"},
		{"Adler32", "ADLER32"},
		{"sha1", "SHA1"},
		{"sHa256", "SHA256"},
		{"sha512", "SHA512"},
		{"crc32c", "CRC32C"},
		{"xxh128", "XXH128"},
		{"", ""},
		{"CRC32", ""},
		{"SHA-256", ""},
		{"MD5 ", ""},
		{"XXH3", ""},
	}
	for _, tt := range tests {
		got, err := checksum.Canonical(tt.in)
		h, herr := checksum.New(tt.in)
		if tt.want == "" {
			if !errors.Is(err, checksum.ErrUnknown) || !errors.Is(herr, checksum.ErrUnknown) || h != nil {
				t.Errorf("%q: Canonical = %q, %v; New = %v, %v; want ErrUnknown", tt.in, got, err, h, herr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if herr != nil {
			t.Errorf("New(%q): %v", tt.in, herr)
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"MD5", "ADLER32", "SHA1", "SHA256", "SHA512", "CRC32C", "XXH128"}
	got := checksum.Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	got[0] = "changed"
	if checksum.Names()[0] != "MD5" {
		t.Errorf("Names shares its slice")
	}
	for _, n := range want {
		if _, err := checksum.New(n); err != nil {
			t.Errorf("New(%s): %v", n, err)
		}
	}
}

func TestSumRange(t *testing.T) {
	data := make([]byte, 2<<20+12345)
	for i := range data {
		data[i] = byte(i ^ i>>8 ^ i>>16)
	}
	size := int64(len(data))
	tests := []struct {
		off, length int64
		wantErr     bool
	}{
		{0, -1, false},
		{0, size, false},
		{0, 0, false},
		{5, 100, false},
		{1<<20 - 1, 2, false},    // across a block boundary
		{3, 2<<20 + 1, false},    // three blocks
		{size - 10, -1, false},   // tail
		{size - 10, 10, false},   // tail, exact
		{size, -1, false},        // empty at the end
		{size, 0, false},         // empty at the end
		{size + 5, -1, false},    // past the end: empty
		{size - 5, 10, true},     // runs past the end
		{size + 1, 1, true},      // starts past the end
		{0, size + 1, true},      // one byte too many
		{-1, 5, true},            // negative offset
		{0, -2, true},            // bad length
		{1 << 62, 1 << 20, true}, // far away
	}
	for _, name := range checksum.Names() {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d+%d", name, tt.off, tt.length), func(t *testing.T) {
				got, err := checksum.Sum(t.Context(), bytes.NewReader(data), tt.off, tt.length, name)
				if tt.wantErr {
					if err == nil {
						t.Errorf("Sum = %s, want an error", got)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				lo, hi := min(tt.off, size), size
				if tt.length >= 0 {
					hi = tt.off + tt.length
				}
				h, _ := checksum.New(name)
				h.Write(data[lo:hi])
				if want := hex.EncodeToString(h.Sum(nil)); got != want {
					t.Errorf("Sum = %s, want %s", got, want)
				}
			})
		}
	}
	_, err := checksum.Sum(t.Context(), bytes.NewReader(data), 0, -1, "nope")
	if !errors.Is(err, checksum.ErrUnknown) {
		t.Errorf("Sum with an unknown name: %v", err)
	}
	_, err = checksum.Sum(t.Context(), bytes.NewReader(data), size-5, 10, "MD5")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short range: %v, want io.ErrUnexpectedEOF", err)
	}
}

// cancelAfter cancels a context after its first read.
type cancelAfter struct {
	io.ReaderAt
	cancel context.CancelFunc
	reads  int
}

func (c *cancelAfter) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	c.cancel()
	return c.ReaderAt.ReadAt(p, off)
}

type failing struct{}

var errDisk = errors.New("disk on fire")

func (failing) ReadAt(p []byte, off int64) (int, error) { return 0, errDisk }

func TestSumErrors(t *testing.T) {
	data := make([]byte, 4<<20)
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelAfter{ReaderAt: bytes.NewReader(data), cancel: cancel}
	if _, err := checksum.Sum(ctx, r, 0, -1, "MD5"); !errors.Is(err, context.Canceled) {
		t.Errorf("Sum = %v, want context.Canceled", err)
	}
	if r.reads != 1 {
		t.Errorf("%d reads after cancel, want 1", r.reads)
	}
	if _, err := checksum.Sum(t.Context(), failing{}, 0, -1, "MD5"); !errors.Is(err, errDisk) {
		t.Errorf("Sum = %v, want the reader's error", err)
	}
}

// Sum reads into one pooled buffer: its allocations do not grow with the
// size of the range.
func TestSumAllocs(t *testing.T) {
	small := bytes.NewReader(make([]byte, 1<<20))
	large := bytes.NewReader(make([]byte, 8<<20))
	for _, name := range checksum.Names() {
		ctx := t.Context()
		a1 := testing.AllocsPerRun(5, func() { checksum.Sum(ctx, small, 0, -1, name) })
		a8 := testing.AllocsPerRun(5, func() { checksum.Sum(ctx, large, 0, -1, name) })
		// Eight blocks against one: a per-block allocation would add 7. The
		// slack is for sync.Pool, which drops buffers at random under -race.
		if a8 > a1+2 {
			t.Errorf("%s: %v allocations for 8 MiB, %v for 1 MiB", name, a8, a1)
		}
	}
}

func BenchmarkSum(b *testing.B) {
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i * 31)
	}
	r := bytes.NewReader(data)
	for _, name := range checksum.Names() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checksum.Sum(b.Context(), r, 0, -1, name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
