package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"ferry/service/api"
)

func TestParseEPPath(t *testing.T) {
	for _, tc := range []struct {
		in       string
		needPath bool
		want     epPath
		bad      string // part of the error
	}{
		{in: "ep:/a/b", needPath: true, want: epPath{"ep", "/a/b"}},
		{in: "alice#data:/x", needPath: true, want: epPath{"alice#data", "/x"}},
		{in: "3f2c8a1e-9d4b-4c7a-8e1f-0a2b3c4d5e6f:/p", needPath: true, want: epPath{"3f2c8a1e-9d4b-4c7a-8e1f-0a2b3c4d5e6f", "/p"}},
		{in: "ep:rel/path", needPath: true, want: epPath{"ep", "rel/path"}},
		{in: "ep:/a:b", needPath: true, want: epPath{"ep", "/a:b"}},
		{in: "ep", want: epPath{"ep", ""}},
		{in: "ep:", want: epPath{"ep", ""}},
		{in: "ep", needPath: true, bad: "no path"},
		{in: "ep:", needPath: true, bad: "no path"},
		{in: ":/a", needPath: true, bad: "want ENDPOINT:PATH"},
		{in: "", bad: "want ENDPOINT:PATH"},
		{in: "ftp://host:2811/a", needPath: true, bad: "is a URL"},
		{in: "my data:/a", needPath: true, bad: "endpoint"},
		{in: "#data:/a", needPath: true, bad: "owner"},
		{in: "alice#:/a", needPath: true, bad: "endpoint"},
	} {
		got, err := parseEPPath(tc.in, tc.needPath)
		switch {
		case tc.bad != "":
			if err == nil || !strings.Contains(err.Error(), tc.bad) || exitCode(err) != exitUsage {
				t.Errorf("parseEPPath(%q) = %v, %v; want a usage error with %q", tc.in, got, err, tc.bad)
			}
		case err != nil || got != tc.want:
			t.Errorf("parseEPPath(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "30", want: 30 * time.Second},
		{in: "0.5", want: 500 * time.Millisecond},
		{in: "0", want: 0},
		{in: "2m", want: 2 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "-5", bad: true},
		{in: "", bad: true},
		{in: "soon", bad: true},
	} {
		got, err := parseDuration("--timeout", tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestExitStatus runs a command tree marked as newRoot marks it and checks
// the exit status and the line main prints for each kind of failure.
func TestExitStatus(t *testing.T) {
	apiErr := func(status int, code string) error {
		return &api.Error{Status: status, Code: code, Message: "it went wrong", RequestID: "R1"}
	}
	for _, tc := range []struct {
		name string
		args []string
		err  error // what the command returns
		code int
		line string
	}{
		{name: "ok", args: []string{"run"}, code: 0},
		{name: "failure", args: []string{"run"}, err: errors.New("boom"), code: exitFailure, line: "boom"},
		{name: "API error", args: []string{"run"}, err: apiErr(404, "NotFound"), code: exitFailure, line: "it went wrong$"},
		{name: "server error", args: []string{"run"}, err: apiErr(500, "Internal"), code: exitFailure, line: "it went wrong (request R1)$"},
		{name: "401", args: []string{"run"}, err: apiErr(401, "Unauthorized"), code: exitAuth, line: "it went wrong$"},
		{name: "wrapped 401", args: []string{"run"}, err: fmt.Errorf("x: %w", apiErr(401, "Unauthorized")), code: exitAuth},
		{name: "usage", args: []string{"run"}, err: usagef("bad input"), code: exitUsage, line: "bad input"},
		{name: "timeout", args: []string{"run"}, err: &exitError{exitTimeout, errors.New("late")}, code: exitTimeout, line: "late"},
		{name: "unknown flag", args: []string{"run", "--bogus"}, code: exitUsage, line: "run: unknown flag: --bogus (usage: ferry run [flags])"},
		{name: "argument count", args: []string{"run", "extra"}, code: exitUsage, line: "run: unknown command"},
		{name: "unknown command", args: []string{"bogus"}, code: exitUsage, line: `unknown command "bogus" for "ferry"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := &cobra.Command{Use: "ferry", SilenceErrors: true, SilenceUsage: true}
			root.AddCommand(&cobra.Command{Use: "run", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return tc.err }})
			markErrors(root)
			root.SetArgs(tc.args)
			root.SetOut(io.Discard)
			err := root.Execute()
			code, got := 0, ""
			if err != nil {
				code, got = exitCode(err), errorLine(err)
			}
			// A line ending in $ is the whole line; others begin it.
			line, whole := strings.CutSuffix(tc.line, "$")
			if code != tc.code || !strings.HasPrefix(got, line) || whole && got != line {
				t.Fatalf("exit %d, line %q; want %d, %q", code, got, tc.code, tc.line)
			}
		})
	}
}

func TestBarState(t *testing.T) {
	for _, tc := range []struct {
		s    barState
		want string
	}{
		{barState{}, "files 0/0  0 B  0 B/s  ETA --"},
		{barState{Done: 1, Files: 4, Moved: 1 << 20, Bytes: 4 << 20, Rate: 1 << 20, Elapsed: time.Second},
			"files 1/4  1.0 MiB/4.0 MiB  1.0 MiB/s  ETA 3s"},
		// A task's total bytes are not known: the time left comes from the files.
		{barState{Done: 10, Files: 40, Moved: 5 << 30, Rate: 100 << 20, Elapsed: 20 * time.Second},
			"files 10/40  5.0 GiB  100.0 MiB/s  ETA 1m0s"},
		{barState{Done: 40, Files: 40, Moved: 2048, Rate: 1024, Elapsed: 2 * time.Second},
			"files 40/40  2.0 KiB  1.0 KiB/s  ETA --"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestTaskState: the bar counts a transfer's files and a delete task's
// paths (the subtasks), not the files a delete removed.
func TestTaskState(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		task api.Task
		want barState
	}{
		{"transfer", api.Task{Type: "TRANSFER", Files: 10, FilesTransferred: 3, FilesSkipped: 2, SubtasksTotal: 10, SubtasksSucceeded: 5,
			SubtasksFailed: 1, BytesTransferred: 300, BytesTotal: 1000, EffectiveBytesPerSecond: 30, RequestTime: now.Add(-10 * time.Second)},
			barState{Done: 6, Files: 10, Moved: 300, Bytes: 1000, Rate: 45, Elapsed: 10 * time.Second}},
		{"delete", api.Task{Type: "DELETE", Files: 100, Directories: 1, FilesTransferred: 1, SubtasksTotal: 2, SubtasksSucceeded: 1,
			SubtasksPending: 1, RequestTime: now.Add(-10 * time.Second)},
			barState{Done: 1, Files: 2, Rate: 45, Elapsed: 10 * time.Second}},
	} {
		if got := taskState(tc.task, 45, now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: taskState = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestService checks where the CLI finds the service and the token, and
// that the saved token never goes to another service.
func TestService(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	const a, b = "http://a.example:8080", "https://b.example"
	for _, tc := range []struct {
		name               string
		flagURL, flagToken string
		envURL, envToken   string
		saved              bool // a saved login for a with token T
		base, token, bad   string
		fromFile           bool
	}{
		{name: "saved", saved: true, base: a, token: "T", fromFile: true},
		{name: "saved, URL with a slash", saved: true, flagURL: a + "/", base: a, token: "T", fromFile: true},
		{name: "another service", saved: true, flagURL: b, base: b},
		{name: "another service by env", saved: true, envURL: b, base: b},
		{name: "flag over env", saved: true, flagURL: a, envURL: b, base: a, token: "T", fromFile: true},
		{name: "token by env", saved: true, envToken: "E", base: a, token: "E"},
		{name: "token by flag", saved: true, flagToken: "F", envToken: "E", base: a, token: "F"},
		{name: "nothing", bad: "which service?"},
		{name: "no scheme", flagURL: "a.example:8080", bad: "want http(s)://host:port"},
		{name: "ftp", flagURL: "ftp://a.example", bad: "want http(s)://host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forgetLogin()
			if tc.saved {
				if _, err := saveLogin(login{URL: a, Token: "T"}); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("FERRY_URL", tc.envURL)
			t.Setenv("FERRY_TOKEN", tc.envToken)
			c := &cli{url: tc.flagURL, token: tc.flagToken}
			base, token, saved, err := c.service(true)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) || exitCode(err) != exitUsage {
					t.Fatalf("error %v, want a usage error with %q", err, tc.bad)
				}
				return
			}
			if err != nil || base != tc.base || token != tc.token || saved != tc.fromFile {
				t.Fatalf("service() = %q, %q, %v, %v; want %q, %q, %v", base, token, saved, err, tc.base, tc.token, tc.fromFile)
			}
		})
	}
}

// TestVersion checks ferry --version and ferry version [-F json]: the
// module version and the Go release that built the binary.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"--version"}, want: "ferry "},
		{args: []string{"version"}, want: "ferry "},
		{args: []string{"version", "-F", "json"}, want: `"DATA_TYPE": "version"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := newRoot()
			var out strings.Builder
			root.SetOut(&out)
			if code := execute(t.Context(), root, tc.args, io.Discard); code != 0 {
				t.Fatalf("exit %d", code)
			}
			if got := out.String(); !strings.HasPrefix(strings.TrimPrefix(got, "{\n  "), tc.want) || !strings.Contains(got, runtime.Version()) {
				t.Errorf("ferry %s printed %q; want %q and %s", strings.Join(tc.args, " "), got, tc.want, runtime.Version())
			}
		})
	}
}

// TestRateMeter: the bar's rate of a task whose bytes the worker persists
// in batches holds between batches instead of sagging and jumping, and
// averages the changes of the last rateWindow.
func TestRateMeter(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type look struct {
		sec   float64 // when
		bytes int64   // what the task said (-1: no look, only a redraw)
		avg   float64 // its effective_bytes_per_second
		want  float64 // the rate shown then
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"first look takes the average", []look{{0, 500, 100, 100}}},
		{"a batch every 2 s at 100 B/s holds between batches", []look{
			{0, 0, 0, 0},
			{0.5, 0, 0, 0},
			{2, 200, 100, 100},
			{2.5, 200, 80, 100}, // the average sags; the meter does not
			{3.5, 200, 57, 100},
			{4, 400, 100, 100},
			{5.9, 400, 68, 100},
		}},
		{"the rate averages the changes of the last rateWindow, not the last one", []look{
			{0, 0, 100, 100},
			{1, 1000, 100, 1000},
			{2, 1100, 100, 550},  // a small batch: 1100 B over 2 s
			{12, 2100, 100, 100}, // the first change left the window: 1100 B over 11 s
		}},
		{"silence beyond twice the last gap: the rate falls", []look{
			{0, 0, 0, 0},
			{2, 200, 100, 100},
			{6, 200, 0, 100},
			{10, -1, 0, 50}, // silent 8 s, held for 4: 100*4/8
			{12, -1, 0, 40}, // 100*4/10
		}},
		{"a short gap still holds holdMin", []look{
			{0, 0, 0, 0},
			{0.1, 100, 0, 1000},
			{1.9, -1, 0, 1000},
			{4.1, -1, 0, 500}, // held 2 s of 4
		}},
		{"the counter went back: start again", []look{
			{0, 0, 0, 0},
			{1, 1000, 0, 1000},
			{2, 10, 7, 7},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m rateMeter
			for _, l := range tc.looks {
				if l.bytes >= 0 {
					m.observe(l.bytes, at(l.sec), l.avg)
				}
				if got := m.rate(at(l.sec)); math.Abs(got-l.want) > 1e-3 {
					t.Fatalf("at %gs (%d bytes): rate %g, want %g", l.sec, l.bytes, got, l.want)
				}
			}
		})
	}
}
