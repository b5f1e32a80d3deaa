package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
	"ferry/storage"
)

// gatedList is a source driver whose listing of the directory dir waits
// until the file until exists (at the destination), or gives up after
// patience and says so (late).
type gatedList struct {
	storage.Driver
	dir, until string
	patience   time.Duration
	late       atomic.Bool
}

func (g *gatedList) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	if name == g.dir {
		deadline := time.Now().Add(g.patience)
		for {
			if _, err := os.Stat(g.until); err == nil {
				break
			}
			if time.Now().After(deadline) {
				g.late.Store(true)
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return g.Driver.ReadDir(ctx, name)
}

// TestFirstFileBeforeListingEnds copies a tree whose second directory
// cannot be listed until the file of the first has arrived at the
// destination: the copy moves files while it lists, so the listing goes
// on and the copy ends well. A copy that listed the whole tree first
// would wait the listing's patience out.
func TestFirstFileBeforeListingEnds(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "tree/a/f"), []byte("first"))
	writeFile(t, filepath.Join(root, "tree/b/g"), []byte("second"))
	g := &gatedList{dir: "/tree/b", until: filepath.Join(dstRoot, "tree/a/f"), patience: 20 * time.Second}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { g.Driver = d; return g })
	dst := startEndpoint(t, dstRoot, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), nil)
	if err != nil || res.Transferred != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if g.late.Load() {
		t.Fatal("/tree/a/f did not arrive while /tree/b was being listed: nothing moved before the listing ended")
	}
	compareTrees(t, filepath.Join(root, "tree"), filepath.Join(dstRoot, "tree"))
}
