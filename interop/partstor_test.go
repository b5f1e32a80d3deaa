//go:build interop

package interop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// verbCounter is a control-channel relay to a server that counts the
// commands a client sends it, by verb; data channels go to the server
// directly (its PASV names itself).
type verbCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// relay listens on loopback and relays each connection to addr, counting
// its commands; it returns the address to connect to.
func (v *verbCounter) relay(t *testing.T, addr string) string {
	t.Helper()
	return controlRelay(t, addr, v.count)
}

// controlRelay listens on loopback and relays each connection to addr,
// handing each command line a client sends to each before it forwards
// it; it returns the address to connect to.
func controlRelay(t *testing.T, addr string, each func(line string)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(c, s); c.Close() }()
			go func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if line != "" {
						each(line)
						if _, werr := io.WriteString(s, line); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				s.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

func (v *verbCounter) count(line string) {
	verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.n == nil {
		v.n = map[string]int{}
	}
	v.n[strings.ToUpper(verb)]++
}

func (v *verbCounter) get(verb string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n[verb]
}

// TestSmallFilesRenamed: `ferry copy -r --tar never` of small files to
// ferry's server sends no RNFR or RNTO (the server writes each file under
// its temporary name and renames it itself: SITE PARTSTOR), to GCT's one
// RNFR and one RNTO a file; either way no file is under its final name
// before it is whole, and the trees end byte-equal, nothing temporary
// left.
func TestSmallFilesRenamed(t *testing.T) {
	needTools(t)
	const files = 40
	for _, dstKind := range []struct {
		name    string
		start   starter
		renames int
	}{{"ferry", startFerry, 0}, {"gct", startGCT, files}} {
		t.Run(dstKind.name, func(t *testing.T) {
			src := startFerry(t)
			w := &finalWatch{src: src.Path("d"), sizes: map[string]int64{}}
			for i := range files {
				rel := fmt.Sprintf("s%02d", i)
				size := int64(1000 + i*7919)
				writeRandomFile(t, src.Path("d/"+rel), size)
				w.names, w.sizes[rel] = append(w.names, rel), size
			}
			dst := dstKind.start(t)
			w.dst, w.equal = dst.Path("d"), map[string]bool{}
			var v verbCounter
			url := strings.Replace(dst.URL("d"), dst.Addr(), v.relay(t, dst.Addr()), 1)
			var out logBuffer
			p, err := startProc(ferryBin, []string{"copy", "-r", "--tar", "never", src.URL("d"), url}, &out)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for !p.exited() {
				w.look(t)
				if time.Now().After(deadline) {
					t.Fatalf("the copy did not end within 60s:\n%s", out.String())
				}
				time.Sleep(time.Millisecond)
			}
			p.wait(10 * time.Second)
			if !strings.Contains(out.String(), " 0 failed") {
				t.Fatalf("copy:\n%s", out.String())
			}
			if n := w.look(t); n != files {
				t.Fatalf("%d of %d files under their names", n, files)
			}
			if err := compareTrees(src.Path("d"), dst.Path("d")); err != nil {
				t.Fatal(err)
			}
			if v.get("STOR") < files || v.get("RNFR") != dstKind.renames || v.get("RNTO") != dstKind.renames {
				t.Errorf("%d STOR, %d RNFR, %d RNTO; want %d STOR at least, %d RNFR and RNTO", v.get("STOR"), v.get("RNFR"), v.get("RNTO"), files, dstKind.renames)
			}
		})
	}
}
