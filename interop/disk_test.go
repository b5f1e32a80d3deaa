package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mountTiny mounts a tmpfs of the given size (needs root); it skips the
// test where mounting is not allowed, unless interop is required.
func mountTiny(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0777", "tmpfs", dir).CombinedOutput(); err != nil {
		if interopRequired() && os.Geteuid() == 0 {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestFerryFullDisk fills the server's disk mid-transfer: the client gets a
// clear "no space" error, the server stays up, and once space is free the
// same upload succeeds intact.
func TestFerryFullDisk(t *testing.T) {
	needTools(t)
	root := mountTiny(t, "2m")
	srv := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	src := filepath.Join(t.TempDir(), "big.bin")
	writeRandomFile(t, src, 5<<20)
	for _, mode := range []struct {
		name string
		args []string
		want string
	}{
		{"mode E", []string{"-p", "2"}, "NO_SPACE_LEFT"},
		{"stream", nil, ""}, // the data connection is cut; the client reports it
	} {
		t.Run(mode.name, func(t *testing.T) {
			args := append(append([]string{}, mode.args...), fileURL(src), srv.URL("big.bin"))
			out, err := gucErr(args...)
			if err == nil {
				t.Fatalf("upload of 5 MiB into 2 MiB succeeded:\n%s", out)
			}
			if mode.want != "" && !strings.Contains(out, mode.want) {
				t.Errorf("error does not say %s:\n%s", mode.want, out)
			}
			os.Remove(srv.Path("big.bin"))
		})
	}
	small := filepath.Join(t.TempDir(), "small.bin")
	writeRandomFile(t, small, 1<<20)
	guc(t, "-p", "2", fileURL(small), srv.URL("small.bin"))
	if err := compareFiles(small, srv.Path("small.bin")); err != nil {
		t.Fatalf("after the disk was freed: %v", err)
	}
}
