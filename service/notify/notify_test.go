package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/internal/smtptest"
	"ferry/service/domain"
	"ferry/service/notify"
)

var (
	alice = domain.User{Name: "alice", Email: "Alice <alice@example.org>"}
	task  = domain.Task{ID: "0b7d-task", Type: domain.TypeTransfer, Label: "nightly\r\nBcc: mallory@example.org",
		Status: domain.StatusFailed, FatalError: &domain.FatalError{Code: "FILE_NOT_FOUND", Description: "/x: no such file"},
		Counters:    domain.Counters{Files: 10, FilesTransferred: 7, FilesSkipped: 2, FilesFailed: 1, BytesTransferred: 123456, Faults: 3},
		RequestTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), CompletionTime: time.Date(2024, 1, 2, 3, 5, 0, 0, time.UTC)}
)

// delivered waits for the one message in maildir.
func delivered(t *testing.T, maildir string) *mail.Message {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		names, _ := filepath.Glob(filepath.Join(maildir, "new", "*"))
		if len(names) > 1 {
			t.Fatalf("%d messages", len(names))
		}
		if len(names) == 1 {
			f, err := os.Open(names[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			m, err := mail.ReadMessage(f)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatal("no message delivered")
	return nil
}

func TestSMTP(t *testing.T) {
	addr, maildir := smtptest.Start(t)
	s := &notify.SMTP{Addr: addr, From: "ferry@example.org", TaskURL: func(id string) string { return "https://ferry.example.org/tasks/" + id }}
	if err := s.Notify(context.Background(), alice, task); err != nil {
		t.Fatal(err)
	}
	m := delivered(t, maildir)
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	if subject != "ferry: task nightly  Bcc: mallory@example.org FAILED" {
		t.Errorf("subject %q", subject)
	}
	if to := m.Header.Get("To"); to != `"Alice" <alice@example.org>` {
		t.Errorf("To %q", to)
	}
	if rcpt := m.Header.Get("X-RcptTo"); rcpt != "alice@example.org" {
		t.Errorf("delivered to %q", rcpt)
	}
	if m.Header.Get("Bcc") != "" {
		t.Error("the label added a header")
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(m.Body))
	for _, want := range []string{"Task 0b7d-task is FAILED.", "FILE_NOT_FOUND: /x: no such file",
		"10 found, 7 transferred, 2 skipped, 1 failed", "Bytes transferred: 123456", "https://ferry.example.org/tasks/0b7d-task"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
}

// TestSMTPDelete: the mail about a delete task says what it deleted, the
// files and directories below its paths, not files found and transferred.
func TestSMTPDelete(t *testing.T) {
	addr, maildir := smtptest.Start(t)
	s := &notify.SMTP{Addr: addr, From: "ferry@example.org", TaskURL: func(id string) string { return "https://ferry.example.org/tasks/" + id }}
	del := domain.Task{ID: "0b7d-delete", Type: domain.TypeDelete, Status: domain.StatusSucceeded,
		Counters: domain.Counters{Files: 100, Directories: 1, FilesTransferred: 1}, RequestTime: task.RequestTime}
	if err := s.Notify(context.Background(), alice, del); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(delivered(t, maildir).Body))
	if !strings.Contains(string(body), "1 path: 100 files and 1 directory deleted, 0 missing, 0 failed") || strings.Contains(string(body), "found") {
		t.Errorf("the mail about a delete task:\n%s", body)
	}
}

func TestSMTPFailures(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name string
		user domain.User
		addr string
		fail bool
	}{
		{"no address: nothing to send", domain.User{Name: "bob"}, dead, false},
		{"bad address", domain.User{Name: "bob", Email: "bob@@x\r\nBcc: y"}, dead, true},
		{"server down", alice, dead, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&notify.SMTP{Addr: tc.addr, From: "ferry@example.org", Timeout: time.Second}).Notify(context.Background(), tc.user, task)
			if (err != nil) != tc.fail {
				t.Fatalf("Notify = %v, want failure %v", err, tc.fail)
			}
		})
	}
}

// hook is a webhook receiver that answers with the statuses in turn (the
// last one from then on) and keeps what it received.
type hook struct {
	mu       sync.Mutex
	statuses []int
	bodies   [][]byte
	sigs     []string
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bodies = append(h.bodies, b)
	h.sigs = append(h.sigs, r.Header.Get(notify.SignatureHeader))
	status := h.statuses[min(len(h.bodies), len(h.statuses))-1]
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		status = http.StatusBadRequest
	}
	w.WriteHeader(status)
}

func TestWebhook(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tls      bool
		trusted  bool // the client trusts the server's certificate
		secret   string
		statuses []int
		tries    int // requests the receiver sees
		fail     bool
	}{
		{name: "http", statuses: []int{200}, tries: 1},
		{name: "https, signed", tls: true, trusted: true, secret: "s3cret", statuses: []int{204}, tries: 1},
		{name: "https, untrusted certificate", tls: true, statuses: []int{200}, tries: 0, fail: true},
		{name: "retried after 5xx and 429", statuses: []int{503, 429, 200}, tries: 3},
		{name: "gives up after three tries", statuses: []int{500}, tries: 3, fail: true},
		{name: "4xx is not retried", statuses: []int{404}, tries: 1, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hook{statuses: tc.statuses}
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted client's handshake
			if tc.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			wh := &notify.Webhook{URL: srv.URL, Secret: tc.secret, Backoff: 10 * time.Millisecond}
			if tc.trusted {
				wh.Client = srv.Client()
			}
			err := wh.Notify(context.Background(), alice, task)
			if (err != nil) != tc.fail {
				t.Fatalf("Notify = %v, want failure %v", err, tc.fail)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.bodies) != tc.tries {
				t.Fatalf("%d requests, want %d", len(h.bodies), tc.tries)
			}
			if tc.tries == 0 {
				return
			}
			var p notify.Payload
			if err := json.Unmarshal(h.bodies[0], &p); err != nil {
				t.Fatal(err)
			}
			if p.TaskID != task.ID || p.Status != domain.StatusFailed || p.Label != task.Label || p.User != "alice" ||
				p.FilesFailed != 1 || p.BytesTransferred != 123456 || p.FatalError.Code != "FILE_NOT_FOUND" ||
				p.CompletionTime == nil || p.DataType != "task_notification" {
				t.Errorf("payload %+v", p)
			}
			want := ""
			if tc.secret != "" {
				want = notify.Sign(tc.secret, h.bodies[0])
			}
			if h.sigs[0] != want || (want != "" && !strings.HasPrefix(want, "sha256=")) {
				t.Errorf("signature %q, want %q", h.sigs[0], want)
			}
		})
	}
}

func TestWebhookGivesUpWithTheContext(t *testing.T) {
	h := &hook{statuses: []int{500}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := (&notify.Webhook{URL: srv.URL, Backoff: time.Hour}).Notify(ctx, alice, task)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second { // not the hour's backoff
		t.Fatalf("Notify = %v after %v", err, time.Since(start))
	}
}

// failing is a notifier that fails, and counts its calls.
type failing struct{ calls atomic.Int32 }

func (f *failing) Notify(context.Context, domain.User, domain.Task) error {
	f.calls.Add(1)
	return errors.New("down")
}

func TestMulti(t *testing.T) {
	h := &hook{statuses: []int{200}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	bad := &failing{}
	err := notify.Multi{bad, &notify.Webhook{URL: srv.URL}}.Notify(context.Background(), alice, task)
	if err == nil || !strings.Contains(err.Error(), "down") {
		t.Fatalf("Multi = %v, want the failing notifier's error", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if bad.calls.Load() != 1 || len(h.bodies) != 1 {
		t.Fatalf("calls %d, webhook requests %d: every notifier is called once", bad.calls.Load(), len(h.bodies))
	}
}
