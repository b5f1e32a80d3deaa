// Package notify tells users that their tasks ended or paused: by e-mail
// through an SMTP server (SMTP), by a JSON POST to a webhook (Webhook), or
// both (Multi). Each has the Notify method the service's workers call.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"strings"
	"sync"
	"time"

	"ferry/internal/fault"
	"ferry/service/domain"
)

// Multi notifies through each of its notifiers at once and joins their
// errors.
type Multi []interface {
	Notify(ctx context.Context, user domain.User, task domain.Task) error
}

// Notify implements the worker's Notifier.
func (m Multi) Notify(ctx context.Context, user domain.User, task domain.Task) error {
	errs := make([]error, len(m))
	var wg sync.WaitGroup
	for i, n := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Notify(ctx, user, task)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// name is how a task is called in a notification: its label, or its ID.
func name(t domain.Task) string {
	if t.Label != "" {
		return t.Label
	}
	return t.ID
}

// SMTP sends an e-mail to the task's user (none to a user without an
// address). It uses STARTTLS when the server offers it.
type SMTP struct {
	Addr    string                 // host:port of the mail server
	From    string                 // the sender's address
	Auth    smtp.Auth              // nil: none
	TaskURL func(id string) string // a task's page, linked from the message; nil: no link
	Timeout time.Duration          // the whole conversation; 0: 30 s
}

// Notify implements the worker's Notifier.
func (s *SMTP) Notify(ctx context.Context, user domain.User, task domain.Task) error {
	if user.Email == "" {
		return nil
	}
	to, err := mail.ParseAddress(user.Email)
	if err != nil {
		return fmt.Errorf("notify %s: address %q: %w", user.Name, user.Email, err)
	}
	msg, err := s.message(to, task)
	if err != nil {
		return err
	}
	if err := s.send(ctx, to.Address, msg); err != nil {
		return fmt.Errorf("notify %s by mail: %w", user.Name, err)
	}
	return nil
}

// message renders the e-mail. The label is the user's text: it only goes
// into the encoded subject and the quoted-printable body.
func (s *SMTP) message(to *mail.Address, t domain.Task) ([]byte, error) {
	var body bytes.Buffer
	fmt.Fprintf(&body, "Task %s is %s.\n", t.ID, t.Status)
	if t.Label != "" {
		fmt.Fprintf(&body, "Label: %s\n", t.Label)
	}
	switch {
	case t.FatalError != nil:
		fmt.Fprintf(&body, "Error: %s: %s\n", t.FatalError.Code, t.FatalError.Description)
	case t.NiceStatus != "":
		fmt.Fprintf(&body, "Status: %s\n", t.NiceStatus)
	}
	c := t.Counters
	if t.Type == domain.TypeDelete {
		fmt.Fprintf(&body, "\nDeleted: %s\n", c.DeleteSummary())
	} else {
		fmt.Fprintf(&body, "\nFiles: %d found, %d transferred, %d skipped, %d failed\n", c.Files, c.FilesTransferred, c.FilesSkipped, c.FilesFailed)
		fmt.Fprintf(&body, "Bytes transferred: %d\nFaults: %d\n", c.BytesTransferred, c.Faults)
	}
	fmt.Fprintf(&body, "Requested: %s\n", t.RequestTime.UTC().Format(time.RFC3339))
	if !t.CompletionTime.IsZero() {
		fmt.Fprintf(&body, "Completed: %s\n", t.CompletionTime.UTC().Format(time.RFC3339))
	}
	if s.TaskURL != nil {
		fmt.Fprintf(&body, "\n%s\n", s.TaskURL(t.ID))
	}

	var id [12]byte
	rand.Read(id[:])
	subject := fmt.Sprintf("ferry: task %s %s", strings.Map(printable, name(t)), t.Status)
	var m bytes.Buffer
	for _, h := range [][2]string{
		{"From", (&mail.Address{Name: "ferry", Address: s.From}).String()},
		{"To", to.String()},
		{"Subject", mime.QEncoding.Encode("utf-8", subject)},
		{"Date", time.Now().Format(time.RFC1123Z)},
		{"Message-ID", fmt.Sprintf("<%x@ferry>", id)},
		{"MIME-Version", "1.0"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Transfer-Encoding", "quoted-printable"},
	} {
		fmt.Fprintf(&m, "%s: %s\r\n", h[0], h[1])
	}
	m.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&m)
	if _, err := qp.Write(bytes.ReplaceAll(body.Bytes(), []byte("\n"), []byte("\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return m.Bytes(), nil
}

// printable maps control characters to spaces.
func printable(r rune) rune {
	if r < ' ' || r == 0x7f {
		return ' '
	}
	return r
}

// send delivers msg to one recipient, as smtp.SendMail does, bounded by
// ctx and Timeout.
func (s *SMTP) send(ctx context.Context, to string, msg []byte) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(s.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host}); err != nil {
			return err
		}
	}
	if s.Auth != nil {
		if err := c.Auth(s.Auth); err != nil {
			return err
		}
	}
	if err := c.Mail(s.From); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// Webhook POSTs a JSON document about the task (see Payload) to URL.
// Failures to reach it (but for a certificate it does not trust) and 5xx
// and 429 answers are tried again, Tries times in all, waiting as
// fault.Backoff says from Backoff.
type Webhook struct {
	URL     string
	Client  *http.Client  // nil: one with a 10 s timeout
	Secret  string        // signs the body (SignatureHeader); "": unsigned
	Tries   int           // 0: 3
	Backoff time.Duration // the first wait; 0: 1 s
}

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body,
// keyed with the webhook's secret.
const SignatureHeader = "X-Ferry-Signature"

// Payload is the document a webhook receives.
type Payload struct {
	DataType         string             `json:"DATA_TYPE"` // "task_notification"
	TaskID           string             `json:"task_id"`
	Type             string             `json:"type"`
	Status           string             `json:"status"`
	NiceStatus       string             `json:"nice_status"`
	FatalError       *domain.FatalError `json:"fatal_error"`
	Label            string             `json:"label"`
	User             string             `json:"user"`
	Files            int64              `json:"files"`
	FilesTransferred int64              `json:"files_transferred"`
	FilesSkipped     int64              `json:"files_skipped"`
	FilesFailed      int64              `json:"files_failed"`
	BytesTransferred int64              `json:"bytes_transferred"`
	Faults           int64              `json:"faults"`
	RequestTime      time.Time          `json:"request_time"`
	CompletionTime   *time.Time         `json:"completion_time"`
}

// Sign is the SignatureHeader value of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Notify implements the worker's Notifier.
func (h *Webhook) Notify(ctx context.Context, user domain.User, t domain.Task) error {
	p := Payload{DataType: "task_notification", TaskID: t.ID, Type: t.Type, Status: t.Status, NiceStatus: t.NiceStatus,
		FatalError: t.FatalError, Label: t.Label, User: user.Name, Files: t.Files, FilesTransferred: t.FilesTransferred,
		FilesSkipped: t.FilesSkipped, FilesFailed: t.FilesFailed, BytesTransferred: t.BytesTransferred, Faults: t.Faults,
		RequestTime: t.RequestTime}
	if !t.CompletionTime.IsZero() {
		p.CompletionTime = &t.CompletionTime
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tries, wait := h.Tries, fault.Backoff{Base: h.Backoff}
	if tries <= 0 {
		tries = 3
	}
	for try := 1; ; try++ {
		retry, err := h.post(ctx, body)
		if err == nil {
			return nil
		}
		if !retry || try == tries {
			return fmt.Errorf("notify %s by webhook (try %d): %w", user.Name, try, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait.Next()):
		}
	}
}

// post sends body once and says whether a failure is worth another try.
func (h *Webhook) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ferry")
	if h.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(h.Secret, body))
	}
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	var cert *tls.CertificateVerificationError
	if err != nil {
		return ctx.Err() == nil && !errors.As(err, &cert), err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("%s answered %s", h.URL, resp.Status)
}
