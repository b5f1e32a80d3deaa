package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// seen is an output that says when it has printed a line holding want.
type seen struct {
	mu   sync.Mutex
	out  strings.Builder
	want string
	once sync.Once
	c    chan struct{}
}

func (s *seen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Write(p)
	if strings.Contains(s.out.String(), s.want) {
		s.once.Do(func() { close(s.c) })
	}
	return len(p), nil
}

// TestCLITaskShowStreams: ferry task show -t prints a task's transfers as
// it pages them. The service's answers reach the CLI through a proxy
// that holds every page but the first until the CLI has printed the
// first page's last file; then every file is there once, in order, in
// one valid JSON document with -F json, and in one table without.
func TestCLITaskShowStreams(t *testing.T) {
	s := startService(t, false)
	ctx := t.Context()
	alice, err := s.db.UserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	task := domain.Task{UserID: alice.ID, Type: domain.TypeTransfer, SrcEndpoint: "ep", DstEndpoint: "ep"}
	if err := s.db.CreateTask(ctx, &task); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Claim(ctx, "w", time.Now(), time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	const n = 2500 // three pages of the CLI's 1,000
	var files []domain.File
	for i := range n {
		p := fmt.Sprintf("/data/d %d/file \"%d\" ü", i/300, i)
		files = append(files, domain.File{Src: p, Dst: "/out" + p, Size: int64(i), State: domain.FileSucceeded})
	}
	for b := range slices.Chunk(files, 500) {
		if err := s.db.Progress(ctx, task.ID, "w", domain.Batch{Files: b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.SetStatus(ctx, task.ID, "w", domain.StatusSucceeded, "", nil, time.Now(), nil); err != nil {
		t.Fatal(err)
	}

	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			out := &seen{want: fmt.Sprintf(`file \"%d\" ü`, 999), c: make(chan struct{})}
			if format == "text" {
				out.want = fmt.Sprintf(`file "%d" ü`, 999)
			}
			svc, _ := url.Parse(s.url)
			proxy := httputil.NewSingleHostReverseProxy(svc)
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("marker") != "" {
					select {
					case <-out.c:
					case <-time.After(20 * time.Second):
						http.Error(w, `{"code":"Held","message":"the CLI printed nothing of the first page before asking for the next"}`, http.StatusServiceUnavailable)
						return
					}
				}
				proxy.ServeHTTP(w, r)
			}))
			defer front.Close()
			s.ok("alice-pw\n", "login", "--url", front.URL, "--username", "alice")
			cmd := exec.CommandContext(ctx, ferryBin, "task", "show", task.ID, "-t", "-F", format)
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+s.home)
			var errOut strings.Builder
			cmd.Stdout, cmd.Stderr = out, &errOut
			if err := cmd.Run(); err != nil {
				t.Fatalf("ferry task show -t -F %s: %v\n%s", format, err, errOut.String())
			}
			var got []string
			switch format {
			case "json":
				var doc api.SuccessfulTransfers
				if err := json.Unmarshal([]byte(out.out.String()), &doc); err != nil {
					t.Fatalf("-F json: %v\n%.500s", err, out.out.String())
				}
				if doc.DataType != "successful_transfers" || doc.NextMarker != 0 {
					t.Errorf("-F json: DATA_TYPE %q, next_marker %d", doc.DataType, doc.NextMarker)
				}
				for _, f := range doc.Data {
					got = append(got, f.SourcePath+" -> "+f.DestinationPath)
				}
			case "text":
				sc := bufio.NewScanner(strings.NewReader(out.out.String()))
				for sc.Scan() {
					if !strings.HasPrefix(sc.Text(), "/data/") {
						continue
					}
					src, rest, _ := strings.Cut(sc.Text(), "  ")
					got = append(got, src+" -> "+strings.Fields(strings.TrimSpace(rest))[0])
				}
				if !strings.HasPrefix(out.out.String(), "SOURCE PATH") {
					t.Errorf("no header:\n%.300s", out.out.String())
				}
			}
			var want []string
			for _, f := range files {
				want = append(want, f.Src+" -> "+f.Dst)
			}
			if format == "text" { // the table's cells end at a space
				for i := range want {
					src, dst, _ := strings.Cut(want[i], " -> ")
					want[i] = src + " -> " + strings.Fields(dst)[0]
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("-F %s: %d files, want %d; first %q, want %q", format, len(got), len(want), got[:min(1, len(got))], want[0])
			}
		})
	}
}
