package main

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
)

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "", want: nil},
		{in: "   \t ", want: nil},
		{in: "# a comment", want: nil},
		{in: "a b", want: []string{"a", "b"}},
		{in: "  a\t\tb  ", want: []string{"a", "b"}},
		{in: "a b # c d", want: []string{"a", "b"}},
		{in: "a#b c", want: []string{"a#b", "c"}},
		{in: `'my file' "your file"`, want: []string{"my file", "your file"}},
		{in: `a\ b c`, want: []string{"a b", "c"}},
		{in: `'it''s' x`, want: []string{"its", "x"}},
		{in: `"say \"hi\" \n" x`, want: []string{`say "hi" \n`, "x"}},
		{in: `'#not a comment' x`, want: []string{"#not a comment", "x"}},
		{in: `'' x`, want: []string{"", "x"}},
		{in: `'open`, bad: true},
		{in: `"open`, bad: true},
		{in: `a\`, bad: true},
	} {
		got, err := shellWords(tc.in)
		if (err != nil) != tc.bad || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("shellWords(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestParseBatch(t *testing.T) {
	item := func(src, dst string, r bool) api.TransferItem {
		return api.TransferItem{DataType: "transfer_item", SourcePath: src, DestinationPath: dst, Recursive: r}
	}
	for _, tc := range []struct {
		name, in         string
		srcBase, dstBase string
		want             []api.TransferItem
		bad              string
	}{
		{name: "absolute", in: "/a /b\n/c/ /d/\n", want: []api.TransferItem{item("/a", "/b", false), item("/c/", "/d/", false)}},
		{name: "comments and blanks", in: "# header\n\n  /a /b  # trailing\n", want: []api.TransferItem{item("/a", "/b", false)}},
		{name: "recursive", in: "--recursive /a /b\n/c /d -r\n", want: []api.TransferItem{item("/a", "/b", true), item("/c", "/d", true)}},
		{name: "under bases", in: "a b\nsub/ 'x y/'\n/abs /abs2\n", srcBase: "/src", dstBase: "/dst/",
			want: []api.TransferItem{item("/src/a", "/dst/b", false), item("/src/sub/", "/dst/x y/", false), item("/abs", "/abs2", false)}},
		{name: "no newline at the end", in: "/a /b", want: []api.TransferItem{item("/a", "/b", false)}},
		{name: "CRLF", in: "/a /b\r\n", want: []api.TransferItem{item("/a", "/b", false)}},
		{name: "one path", in: "/a /b\n/c\n", bad: "line 2: want SOURCE_PATH DEST_PATH, got 1"},
		{name: "three paths", in: "/a /b /c\n", bad: "line 1: want SOURCE_PATH DEST_PATH, got 3"},
		{name: "unknown option", in: "--external-checksum x /a /b\n", bad: `line 1: unknown option "--external-checksum"`},
		{name: "quote", in: "/a '/b\n", bad: "line 1: unterminated ' quote"},
		{name: "empty", in: "# nothing\n\n", bad: "no items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBatch(strings.NewReader(tc.in), tc.srcBase, tc.dstBase)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) || exitCode(err) != exitUsage {
					t.Fatalf("error %v, want a usage error with %q", err, tc.bad)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestTransferRequest builds transfer documents from ferry transfer's
// arguments and flags.
func TestTransferRequest(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		src, dst string
		more     []string // more destinations
		o        transferOpts
		batch    string // with --batch when not ""
		want     string // the document as JSON
		bad      string
	}{
		{name: "one file", src: "a:/x", dst: "b:/y", o: transferOpts{verify: true},
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destination_endpoint":"b","verify_checksum":true,
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x","destination_path":"/y"}]}`},
		{name: "every option", src: "alice#a:/x/", dst: "b:/y/", o: transferOpts{
			recursive: true, verify: true, noVerify: true, preserve: true, deleteExtra: true, syncLevel: "mtime",
			label: "nightly", deadline: "2h", algorithm: "SHA256", submissionID: "s1", notify: "off",
			filters: []api.FilterRule{{Method: "exclude", Name: "*.tmp"}, {Method: "include", Name: "*"}},
		}, want: `{"DATA_TYPE":"transfer","submission_id":"s1","label":"nightly","source_endpoint":"alice#a",
				"destination_endpoint":"b","sync_level":2,"checksum_algorithm":"SHA256","preserve_timestamp":true,
				"delete_destination_extra":true,"deadline":"2026-11-21T14:00:00Z",
				"filter_rules":[{"method":"exclude","name":"*.tmp"},{"method":"include","name":"*"}],
				"notify_on_succeeded":false,"notify_on_failed":false,"notify_on_inactive":false,
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x/","destination_path":"/y/","recursive":true}]}`},
		{name: "sync level by number", src: "a:/x", dst: "b:/y", o: transferOpts{syncLevel: "0"},
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destination_endpoint":"b","sync_level":0,
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x","destination_path":"/y"}]}`},
		{name: "sync level none", src: "a:/x", dst: "b:/y", o: transferOpts{syncLevel: "none"},
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destination_endpoint":"b",
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x","destination_path":"/y"}]}`},
		{name: "RFC 3339 deadline", src: "a:/x", dst: "b:/y", o: transferOpts{deadline: "2026-12-01T00:00:00Z"},
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destination_endpoint":"b","deadline":"2026-12-01T00:00:00Z",
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x","destination_path":"/y"}]}`},
		{name: "batch under bases", src: "a:/in", dst: "b", batch: "f1 /out/f1\n-r d d2\n",
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destination_endpoint":"b",
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/in/f1","destination_path":"/out/f1"},
				{"DATA_TYPE":"transfer_item","source_path":"/in/d","destination_path":"d2","recursive":true}]}`},
		{name: "several destinations", src: "a:/x/", dst: "b:/y/", more: []string{"c:/z/", "alice#d:/w"}, o: transferOpts{recursive: true},
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destinations":[
				{"DATA_TYPE":"transfer_destination","endpoint":"b"},
				{"DATA_TYPE":"transfer_destination","endpoint":"c","destination_paths":["/z/"]},
				{"DATA_TYPE":"transfer_destination","endpoint":"alice#d","destination_paths":["/w"]}],
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/x/","destination_path":"/y/","recursive":true}]}`},
		{name: "batch to several", src: "a:/in", dst: "b:/b", more: []string{"c:/c"}, batch: "f1 /out/f1\nd d2\n",
			want: `{"DATA_TYPE":"transfer","source_endpoint":"a","destinations":[
				{"DATA_TYPE":"transfer_destination","endpoint":"b"},
				{"DATA_TYPE":"transfer_destination","endpoint":"c","destination_paths":["/out/f1","/c/d2"]}],
				"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/in/f1","destination_path":"/out/f1"},
				{"DATA_TYPE":"transfer_item","source_path":"/in/d","destination_path":"/b/d2"}]}`},
		{name: "no path at a second destination", src: "a:/x", dst: "b:/y", more: []string{"c"}, bad: "no path"},
		{name: "no path", src: "a", dst: "b:/y", bad: "no path"},
		{name: "bad sync level", src: "a:/x", dst: "b:/y", o: transferOpts{syncLevel: "newer"}, bad: "sync level"},
		{name: "past duration", src: "a:/x", dst: "b:/y", o: transferOpts{deadline: "-1h"}, bad: "--deadline"},
		{name: "bad deadline", src: "a:/x", dst: "b:/y", o: transferOpts{deadline: "friday"}, bad: "--deadline"},
		{name: "bad notify", src: "a:/x", dst: "b:/y", o: transferOpts{notify: "sometimes"}, bad: "--notify"},
		{name: "batch and -r", src: "a", dst: "b", o: transferOpts{recursive: true}, batch: "x y\n", bad: "-r does not go with --batch"},
		{name: "bad batch", src: "a", dst: "b", batch: "x\n", bad: "--batch line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var batch io.Reader
			if tc.batch != "" {
				batch = strings.NewReader(tc.batch)
			}
			got, err := tc.o.request(tc.src, append([]string{tc.dst}, tc.more...), batch, now)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) || exitCode(err) != exitUsage {
					t.Fatalf("error %v, want a usage error with %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want api.Transfer
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Fatalf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

// TestTaskFieldsDestinations: ferry task show gives each destination of
// a transfer to several its line of progress.
func TestTaskFieldsDestinations(t *testing.T) {
	task := api.Task{TaskID: "t1", Type: "TRANSFER", Files: 10, DestinationEndpointDisplayName: "u#a", Destinations: []api.TaskDestination{
		{EndpointID: "id-a", EndpointDisplayName: "u#a", FilesTransferred: 10, BytesTransferred: 2048},
		{EndpointID: "id-b", EndpointDisplayName: "u#b", FilesTransferred: 3, FilesSkipped: 4, FilesFailed: 1},
	}}
	var lines []string
	for _, f := range taskFields(task, "") {
		if f[0] == "Destination Endpoint" {
			lines = append(lines, f[1])
		}
	}
	want := []string{"u#a (id-a): 10/10 files (10 transferred, 0 skipped), 0 failed, 2.0 KiB",
		"u#b (id-b): 7/10 files (3 transferred, 4 skipped), 1 failed, 0 B"}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("destination lines:\n%q\nwant\n%q", lines, want)
	}
}

// TestChecksumField: ferry task show names the checksum algorithm the task
// asked for, else the one its start chose, else says who chooses.
func TestChecksumField(t *testing.T) {
	for _, tc := range []struct{ requested, used, want string }{
		{"SHA1", "SHA1", "SHA1"},
		{"SHA1", "", "SHA1"},
		{"", "MD5", "MD5 (the fastest both endpoints offer)"},
		{"", "", "the fastest both endpoints offer (chosen when the task starts)"},
	} {
		if got := checksumField(tc.requested, tc.used); got != tc.want {
			t.Errorf("checksumField(%q, %q) = %q; want %q", tc.requested, tc.used, got, tc.want)
		}
	}
}
