package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"ferry/engine"
)

// TestAuthenticatedCopy: between two ferry servers the data channels prove
// a credential the copy made (DATATLS), in the clear or encrypted.
func TestAuthenticatedCopy(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "tree/big"), random(3<<20))
	for i := range 20 {
		writeFile(t, filepath.Join(src.root, "tree", "small", string(rune('a'+i))), random(1000*i))
	}
	for _, encrypt := range []bool{false, true} {
		o := fastOptions()
		o.Encrypt, o.Parallelism = encrypt, 2
		res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, o, nil)
		if err != nil || res.Failed != 0 || !res.Settings.Authenticated {
			t.Fatalf("encrypt %v: %+v %v", encrypt, res, err)
		}
		compareTrees(t, filepath.Join(src.root, "tree"), filepath.Join(dst.root, "tree"))
	}
}
