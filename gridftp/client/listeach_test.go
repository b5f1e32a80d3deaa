package client_test

import (
	"context"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/storage/synthetic"
)

// TestListEachSlowReader lists a directory whose listing is larger than
// the sockets hold, with a reader that takes its first entry in slower
// than the session's timeout (as the engine does when its window is
// full): the server waits on the data channel and sends its final reply
// only once the reader has taken everything, and neither that wait nor
// the quiet data channel is a timeout. It was: "i/o timeout" (the
// control channel's read deadline), and the receiver's "no data".
func TestListEachSlowReader(t *testing.T) {
	const n = 200000 // ~16 MB of listing
	fs, err := synthetic.New(synthetic.Tree{Files: n, Size: 1, PerDir: n, Fan: 2})
	if err != nil {
		t.Fatal(err)
	}
	addr := servertest.Serve(t, &server.Server{FS: fs, Anonymous: true, BlockSize: 64 << 10, DataTimeout: 10 * time.Second})
	c := dial(t, addr, 1)
	c.Timeout = 500 * time.Millisecond
	got := 0
	err = c.ListEach(context.Background(), "/", func(gridftp.Entry) error {
		if got == 0 {
			time.Sleep(4 * c.Timeout) // the listing waits, held by its reader
		}
		got++
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("ListEach: %d of %d entries, %v", got, n, err)
	}
}
