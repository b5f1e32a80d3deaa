package worker

import (
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/service/domain"
)

// TestDoneCountsWhatAKilledRunMoved: a file an earlier run started (its
// partial record) and that is whole at the destination now is recorded
// transferred, and the bytes the earlier run moved and did not count
// count now; a file with no record, or one this run sent, counts as the
// engine says.
func TestDoneCountsWhatAKilledRunMoved(t *testing.T) {
	const size = 100
	mtime := time.Unix(1e9, 0).UTC()
	var first40 gridftp.Ranges
	first40.Add(0, 40)
	for _, c := range []struct {
		name   string
		record *engine.Partial // of an earlier run
		result engine.FileResult
		want   domain.Counters
		state  string
	}{
		{"whole, started before", &engine.Partial{Size: size, Modify: mtime},
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesTransferred: 1, BytesTransferred: size, BytesTotal: size}, domain.FileSucceeded},
		{"whole, 40 bytes recorded before", &engine.Partial{Size: size, Modify: mtime, Have: first40},
			engine.FileResult{Outcome: engine.Transferred},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size - 40, BytesTotal: size - 40}, domain.FileSucceeded},
		{"resumed: this run sent the rest", &engine.Partial{Size: size, Modify: mtime, Have: first40},
			engine.FileResult{Outcome: engine.Transferred, Moved: size - 40},
			domain.Counters{FilesTransferred: 1}, domain.FileSucceeded},
		{"another file by now", &engine.Partial{Size: size + 1, Modify: mtime},
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesSkipped: 1}, domain.FileSkipped},
		{"no record", nil,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesSkipped: 1}, domain.FileSkipped},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProgress(&Worker{}, domain.Task{ID: "t"})
			if c.record != nil {
				p.loadPartials([]domain.Partial{{Src: "/f", State: encodePartial(*c.record)}})
			}
			r := c.result
			r.Src, r.Dst, r.Size = "/f", "/f", size
			p.Done(r)
			if p.delta != c.want {
				t.Errorf("counters %+v, want %+v", p.delta, c.want)
			}
			if len(p.files) != 1 || p.files[0].State != c.state {
				t.Errorf("file records %+v, want one %s", p.files, c.state)
			}
		})
	}
}
