package server_test

import (
	"testing"

	"ferry/gridftp/server"
)

// TestStats checks that sessions, transfers, their bytes and refusals move
// the server's Stats, each step on top of the ones before.
func TestStats(t *testing.T) {
	stats := &server.Stats{}
	env := startServer(t, func(s *server.Server) { s.Stats = stats })
	c := env.login()
	c.expectText("TYPE I", "200 Type set to I.")
	data := pattern(300000)
	type counts struct{ sessions, in, out, ok, failed, aborted, transient, permanent int64 }
	for _, step := range []struct {
		name string
		do   func()
		want counts
	}{
		{"login", func() {}, counts{sessions: 1}},
		{"STOR", func() {
			if r := storStream(t, c, "STOR f", c.pasv(), data); r.Code != 226 {
				t.Fatalf("STOR: %q", r.String())
			}
		}, counts{sessions: 1, in: 300000, ok: 1}},
		{"RETR", func() {
			if r, got := retrStream(t, c, "RETR f", c.pasv()); r.Code != 226 || len(got) != len(data) {
				t.Fatalf("RETR: %q, %d bytes", r.String(), len(got))
			}
		}, counts{sessions: 1, in: 300000, out: 300000, ok: 2}},
		{"no data channel", func() {
			c.expect("RETR f", 425)
		}, counts{sessions: 1, in: 300000, out: 300000, ok: 2, transient: 1}},
		{"RETR of a missing file", func() {
			c.pasv()
			c.expect("RETR nosuch", 550)
		}, counts{sessions: 1, in: 300000, out: 300000, ok: 2, failed: 1, transient: 1, permanent: 1}},
		{"another session", func() { env.login() }, counts{sessions: 2, in: 300000, out: 300000, ok: 2, failed: 1, transient: 1, permanent: 1}},
	} {
		step.do()
		got := counts{stats.Sessions.Load(), stats.BytesIn.Load(), stats.BytesOut.Load(), stats.Succeeded.Load(),
			stats.Failed.Load(), stats.Aborted.Load(), stats.Transient.Load(), stats.Permanent.Load()}
		if got != step.want {
			t.Fatalf("after %s: %+v, want %+v", step.name, got, step.want)
		}
	}
}
