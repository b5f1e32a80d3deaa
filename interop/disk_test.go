//go:build interop

package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/internal/interoptest"
)

// mountTiny mounts a tmpfs of the given size (needs root); it skips the
// test where mounting is not allowed, unless interop is required.
func mountTiny(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0777", "tmpfs", dir).CombinedOutput(); err != nil {
		if interoptest.Required() && os.Geteuid() == 0 {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fullDiskWait bounds each upload into the full disk: it fails in
// milliseconds; a client left waiting is the defect.
const fullDiskWait = 30 * time.Second

// TestFerryFullDisk fills the server's disk mid-transfer: the client gets a
// clear "no space" error at once, the server stays up, and once space is
// free the same upload succeeds intact. Each upload must end within
// fullDiskWait. In stream mode globus-url-copy used to finish its writes
// after the reply and then wait for ever (killed after 2 minutes, in most
// runs; see drainStream), so stream mode goes three times. MODE E hung
// too, in about 1 run of 20 under load: the reply came before
// globus-url-copy had handed over its EOF, which it then never sent (see
// Receiver.Drain, TestModeEFailedStoreDrains); it goes three times too.
func TestFerryFullDisk(t *testing.T) {
	needTools(t)
	root := mountTiny(t, "2m")
	srv := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	src := filepath.Join(t.TempDir(), "big.bin")
	writeRandomFile(t, src, 5<<20)
	for _, mode := range []struct {
		name  string
		args  []string
		times int
	}{
		{"mode E", []string{"-p", "2"}, 3},
		{"stream", nil, 3},
	} {
		t.Run(mode.name, func(t *testing.T) {
			args := append(append([]string{}, mode.args...), fileURL(src), srv.URL("big.bin"))
			for range mode.times {
				out, err := runTool(context.Background(), fullDiskWait, "", "globus-url-copy", args...)
				if err == nil {
					t.Fatalf("upload of 5 MiB into 2 MiB succeeded:\n%s", out)
				}
				if !strings.Contains(out, "NO_SPACE_LEFT") {
					t.Fatalf("error does not say NO_SPACE_LEFT: %v\n%s", err, out)
				}
				os.Remove(srv.Path("big.bin"))
			}
		})
	}
	small := filepath.Join(t.TempDir(), "small.bin")
	writeRandomFile(t, small, 1<<20)
	guc(t, "-p", "2", fileURL(small), srv.URL("small.bin"))
	if err := compareFiles(small, srv.Path("small.bin")); err != nil {
		t.Fatalf("after the disk was freed: %v", err)
	}
}
