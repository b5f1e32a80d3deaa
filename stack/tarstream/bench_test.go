package tarstream

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

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
