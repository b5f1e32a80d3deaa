package tarstream

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ferry/stack"
	"ferry/storage"
)

// BenchmarkTarRoundTrip packs a tree of 2,000 files of 50 KB and unpacks
// it in the same tree, through an io.Pipe as between two servers.
func BenchmarkTarRoundTrip(b *testing.B) {
	tr := newTree(b)
	data := fill(50 << 10)
	for i := range 2000 {
		tr.write(fmt.Sprintf("src/d%02d/f%04d", i/100, i), data)
	}
	layer := terminal(b, TarLayer, tr.env())
	b.SetBytes(2000 * int64(len(data)))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		src, err := layer.Open(ctx, &stack.Transfer{Name: "/src"})
		if err != nil {
			b.Fatal(err)
		}
		dst := fmt.Sprintf("/dst%d", i)
		sink, err := layer.Create(ctx, &stack.Transfer{Name: dst, Flag: storage.Truncate})
		if err != nil {
			b.Fatal(err)
		}
		pr, pw := io.Pipe()
		go func() {
			_, err := io.CopyBuffer(pw, src.(io.Reader), make([]byte, 256<<10))
			pw.CloseWithError(stack.End(src, err))
		}()
		_, err = io.CopyBuffer(sink.(io.Writer), pr, make([]byte, 256<<10))
		if err := stack.End(sink, err); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(filepath.Join(tr.root, dst))
		b.StartTimer()
	}
}

// BenchmarkUnpack unpacks a tar stream of 4 directories of 500 files of
// 50 KB, held in memory, into a fresh directory. The trees are left in place: deleting them
// would slow down the next creations on some file systems (ext4 without a
// journal skips recently freed inodes one by one).
func BenchmarkUnpack(b *testing.B) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := fill(50 << 10)
	for i := range 2000 {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%d/f%04d", i/500, i), Size: int64(len(data)), Mode: 0o644, ModTime: time.Unix(1e9, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	tr := newTree(b)
	layer := terminal(b, TarLayer, tr.env())
	b.SetBytes(2000 * int64(len(data)))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		dst := fmt.Sprintf("/dst%d", i)
		sink, err := layer.Create(ctx, &stack.Transfer{Name: dst, Flag: storage.Truncate})
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.CopyBuffer(sink.(io.Writer), bytes.NewReader(buf.Bytes()), make([]byte, 256<<10))
		if err := stack.End(sink, err); err != nil {
			b.Fatal(err)
		}
	}
}
