package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeRunYourOwn: the README's "Run your own", run as a new user
// would, with the real binary, reaches a finished transfer of the user's
// own data. The steps' code blocks run in one bash, as written, but for
// what a test must change: the build (the test built ferry), the ports
// (free ones on 127.0.0.1), the home directory (a temporary one), the
// password (typed by the test) and the task ID (taken from transfer's
// output, as the user would copy it).
func TestReadmeRunYourOwn(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := readmeSection(string(readme), "## Run your own")
	if steps == "" {
		t.Fatal(`the README has no "## Run your own" section`)
	}
	home := t.TempDir()
	files := map[string]string{"notes.txt": "my notes\n", "runs/a.dat": strings.Repeat("a", 3<<20), "runs/deep/b.dat": "b"}
	for name, data := range files {
		writeFile(t, filepath.Join(home, "mydata", name), data)
	}

	script := []string{
		"set -euo pipefail",
		`waitport() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }`,
	}
	ports := map[string]string{}
	port := regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
	for _, line := range codeLines(steps) {
		if strings.HasPrefix(line, "make ") {
			continue // the test built ferry
		}
		line = port.ReplaceAllStringFunc(line, func(addr string) string {
			if ports[addr] == "" {
				ports[addr] = freeAddr(t)
			}
			return ports[addr]
		})
		line = strings.ReplaceAll(line, "TASK_ID", `"$TASK_ID"`)
		switch {
		case strings.HasPrefix(line, "ferry user add ") || strings.HasPrefix(line, "ferry login "):
			line = `echo "$PASSWORD" | ` + line
		case strings.HasPrefix(line, "ferry transfer "):
			line = "TASK_ID=$(" + line + ")"
		}
		script = append(script, line)
		if strings.HasSuffix(line, "&") {
			m := port.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%q: a server in the background that names no address: the next step cannot know when it is up", line)
			}
			script = append(script, "waitport "+m[1])
		}
	}

	cmd := exec.Command("bash", "-c", strings.Join(script, "\n"))
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"PATH="+filepath.Dir(ferryBin)+":"+os.Getenv("PATH"), "PASSWORD=a-long-password", "FERRY_URL=", "FERRY_TOKEN=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe, takes the output: the servers left running
	// in the background hold it open after bash ends.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopGroup(cmd.Process.Pid) // the servers the steps started
	err = cmd.Wait()
	printed, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("the README's steps failed: %v\n%s\n%s", err, strings.Join(script, "\n"), printed)
	}
	if !bytes.Contains(printed, []byte("SUCCEEDED")) {
		t.Errorf("ferry task wait did not say SUCCEEDED:\n%s", printed)
	}
	copied := filepath.Join(home, "ferry-copy", "run1")
	for name, data := range files {
		wantFile(t, filepath.Join(copied, name), data)
	}
}

// readmeSection is the text of doc from the heading to the next heading
// of its level or above, or "" if doc has no such heading.
func readmeSection(doc, heading string) string {
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// codeLines are the lines of text's code blocks, indented or not, without
// their indentation and comments.
func codeLines(text string) []string {
	var lines []string
	inBlock := false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if l = strings.TrimSpace(commentRE.ReplaceAllString(l, "")); inBlock && l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// freeAddr is an address on 127.0.0.1 that nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr())
}

// stopGroup stops the processes of group pgid with SIGTERM and waits,
// a minute at most, until none is left, so that none still writes in the
// test's directories as they are removed.
func stopGroup(pgid int) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}
