package worker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/service/domain"
)

// TestDoneCountsWhatAKilledRunMoved: a file an earlier run started (its
// partial record) and that is whole at the destination now is recorded
// transferred, and a transferred file counts its size once: the bytes the
// earlier run moved and did not count count now, and those sent again,
// by this run or by an earlier engine run of it, are taken back. A file
// with no record, or one this run sent, counts as the engine says.
func TestDoneCountsWhatAKilledRunMoved(t *testing.T) {
	const size = 100
	mtime := time.Unix(1e9, 0).UTC()
	var first40 gridftp.Ranges
	first40.Add(0, 40)
	for _, c := range []struct {
		name   string
		record *engine.Partial // of an earlier run
		before int64           // bytes an earlier engine run of this run reported
		result engine.FileResult
		want   domain.Counters // this run's, the bytes it reported included
		state  string
	}{
		{"whole, started before", &engine.Partial{Size: size, Modify: mtime}, 0,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesTransferred: 1, BytesTransferred: size, BytesTotal: size}, domain.FileSucceeded},
		{"whole, 40 bytes recorded before", &engine.Partial{Size: size, Modify: mtime, Have: first40}, 0,
			engine.FileResult{Outcome: engine.Transferred},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size - 40, BytesTotal: size - 40}, domain.FileSucceeded},
		{"resumed: this run sent the rest", &engine.Partial{Size: size, Modify: mtime, Have: first40}, 0,
			engine.FileResult{Outcome: engine.Transferred, Moved: size - 40},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size - 40}, domain.FileSucceeded},
		{"resumed: this run sent 20 recorded bytes again", &engine.Partial{Size: size, Modify: mtime, Have: first40}, 0,
			engine.FileResult{Outcome: engine.Transferred, Moved: size - 20},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size - 40, BytesTotal: -20}, domain.FileSucceeded},
		{"another file by now", &engine.Partial{Size: size + 1, Modify: mtime}, 0,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesSkipped: 1}, domain.FileSkipped},
		{"another file by now, 40 bytes of it recorded", &engine.Partial{Size: size + 1, Modify: mtime, Have: first40}, 0,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesSkipped: 1, BytesTransferred: -40, BytesTotal: -40}, domain.FileSkipped},
		{"another file by now, sent whole", &engine.Partial{Size: size + 1, Modify: mtime, Have: first40}, 0,
			engine.FileResult{Outcome: engine.Transferred, Moved: size},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size - 40, BytesTotal: -40}, domain.FileSucceeded},
		{"no record", nil, 0,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesSkipped: 1}, domain.FileSkipped},
		{"no record, sent by this run", nil, 0,
			engine.FileResult{Outcome: engine.Transferred, Moved: size},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size}, domain.FileSucceeded},
		{"no record, 30 bytes sent by an earlier engine run, then whole", nil, 30,
			engine.FileResult{Outcome: engine.Transferred, Moved: size},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size, BytesTotal: -30}, domain.FileSucceeded},
		{"no record, sent by an earlier engine run, then found whole", nil, size,
			engine.FileResult{Outcome: engine.Skipped},
			domain.Counters{Files: 1, FilesTransferred: 1, BytesTransferred: size}, domain.FileSucceeded},
		{"no record, whole already (a tar member's, uncounted)", nil, 0,
			engine.FileResult{Outcome: engine.Transferred},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size, BytesTotal: size}, domain.FileSucceeded},
		{"a tar member, its bytes with its result", nil, 0,
			engine.FileResult{Outcome: engine.Transferred, Moved: size, Unreported: size},
			domain.Counters{FilesTransferred: 1, BytesTransferred: size}, domain.FileSucceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProgress(&Worker{}, domain.Task{ID: "t"})
			if c.record != nil {
				p.loadPartials([]domain.Partial{{Src: "/f", State: encodePartial(*c.record, c.record.Have.Total())}})
			}
			r := c.result
			r.Src, r.Dst, r.Size = "/f", "/f", size
			// The engine reports what it moves, but a tar member's, as it goes.
			for _, n := range []int64{c.before, r.Moved - r.Unreported} {
				if n != 0 {
					p.FileProgress("/f", n)
				}
			}
			p.Done(r)
			got := p.delta // and those stored with the records
			for _, d := range p.tied {
				got.Add(d)
			}
			if got != c.want {
				t.Errorf("counters %+v, want %+v", got, c.want)
			}
			if len(p.files) != 1 || p.files[0].State != c.state {
				t.Errorf("file records %+v, want one %s", p.files, c.state)
			}
		})
	}
}

// batches is a store that keeps the batches it is given.
type batches struct {
	domain.Store
	got []domain.Batch
}

func (s *batches) Progress(_ context.Context, _, _ string, b domain.Batch) error {
	s.got = append(s.got, b)
	return nil
}

// TestStartedRecordsWait: the record of a tar member only started waits a
// flush interval (the members end within it and never reach the store);
// another file's, one with ranges, a deletion and the run's last flush do
// not wait.
func TestStartedRecordsWait(t *testing.T) {
	now := time.Unix(2e9, 0)
	store := &batches{}
	p := newProgress(&Worker{Store: store, Now: func() time.Time { return now }, FlushEvery: time.Second}, domain.Task{ID: "t"})
	srcs := func() []string {
		var out []string
		for _, b := range store.got {
			for _, pt := range b.Partials {
				out = append(out, pt.Src+"="+pt.State)
			}
		}
		store.got = nil
		slices.Sort(out)
		return out
	}
	flush := func(all bool) []string {
		t.Helper()
		if err := p.flushing(context.Background(), all); err != nil {
			t.Fatal(err)
		}
		return srcs()
	}
	epoch := time.Unix(0, 0)
	var some gridftp.Ranges
	some.Add(0, 5)
	p.Partial("/ends", engine.Partial{Size: 10, Modify: epoch, Member: true})
	p.Partial("/waits", engine.Partial{Size: 10, Modify: epoch, Member: true})
	p.Partial("/ranges", engine.Partial{Size: 10, Modify: epoch, Have: some})
	p.Partial("/alone", engine.Partial{Size: 10, Modify: epoch})
	if got, want := flush(false), []string{"/alone=10 0 counted=0", "/ranges=10 0 0-5 counted=0"}; !slices.Equal(got, want) {
		t.Errorf("first flush put %q, want %q", got, want)
	}
	p.Done(engine.FileResult{Src: "/ends", Dst: "/ends", Size: 10, Outcome: engine.Transferred})
	now = now.Add(500 * time.Millisecond)
	p.Partial("/waits", engine.Partial{Size: 10, Modify: epoch, Member: true}) // reported again: still the first time counts
	if got := flush(false); len(got) != 0 {
		t.Errorf("flush within the interval put %q, want nothing", got)
	}
	now = now.Add(600 * time.Millisecond)
	if got, want := flush(false), []string{"/waits=10 0 counted=0"}; !slices.Equal(got, want) {
		t.Errorf("flush after the interval put %q, want %q", got, want)
	}
	p.Partial("/young", engine.Partial{Size: 10, Modify: epoch, Member: true})
	p.Done(engine.FileResult{Src: "/waits", Dst: "/waits", Size: 10, Outcome: engine.Transferred})
	if got, want := flush(true), []string{"/waits=", "/young=10 0 counted=0"}; !slices.Equal(got, want) {
		t.Errorf("last flush put %q, want %q", got, want)
	}
}

// TestCountersGoWithRecords: a flush stores the counters of the records it
// stores, a file's bytes not yet stored with its record, and no others'
// (another file's bytes stored with a record that waits were left
// uncounted by a crash: kill9-service counted 2,879 bytes short): stored
// ahead of their records, a crash would leave files counted whose next
// run counts them again (a resumed task of 200,000 files ended with
// 201,501 transferred).
func TestCountersGoWithRecords(t *testing.T) {
	store := &batches{}
	p := newProgress(&Worker{Store: store}, domain.Task{ID: "t"})
	const n, size = 2*maxBatchFiles + 200, 10
	p.FileProgress("/big", 7) // a file still moving: its bytes go in the first flush
	for i := range n {
		src := fmt.Sprintf("/m%d", i)
		p.FileProgress(src, size) // a member's bytes, reported as it ends
		p.Done(engine.FileResult{Src: src, Dst: src, Size: size, Outcome: engine.Transferred, Moved: size})
	}
	if err := p.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(store.got) != 3 {
		t.Fatalf("%d batches, want 3", len(store.got))
	}
	for i, b := range store.got {
		want := domain.Counters{FilesTransferred: int64(len(b.Files)), BytesTransferred: size * int64(len(b.Files))}
		if i == 0 {
			want.BytesTransferred += 7
		}
		if b.Delta != want {
			t.Errorf("batch %d of %d records: counters %+v, want %+v", i, len(b.Files), b.Delta, want)
		}
	}

	// A file whose bytes were stored before it ended takes none of
	// another's with its record.
	store.got = nil
	p.FileProgress("/early", size)
	if err := p.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.FileProgress("/big", 1000)
	p.Done(engine.FileResult{Src: "/early", Dst: "/early", Size: size, Outcome: engine.Transferred, Moved: size})
	if got, want := p.tied[0], (domain.Counters{FilesTransferred: 1}); len(p.tied) != 1 || got != want || p.delta.BytesTransferred != 1000 {
		t.Errorf("after /early ended: its record's counters %+v (want %+v), the others' %+v (want 1,000 bytes)", p.tied, want, p.delta)
	}
	// A tar member's bytes come with its result: stored with its record.
	p.Done(engine.FileResult{Src: "/member", Dst: "/member", Size: size, Outcome: engine.Transferred, Moved: size, Unreported: size})
	if got, want := p.tied[1], (domain.Counters{FilesTransferred: 1, BytesTransferred: size}); got != want || p.delta.BytesTransferred != 1000 {
		t.Errorf("after /member ended: its record's counters %+v (want %+v), the others' %+v (want 1,000 bytes)", got, want, p.delta)
	}
}

// TestLoadPartialsCountTheirRanges: the bytes a partial record counted
// beyond its ranges go again, so a run that loads it takes them back, and
// those its ranges have beyond its count count; it stores the record
// again counting its ranges. A record that counts its ranges, or one
// stored before records counted, changes nothing.
func TestLoadPartialsCountTheirRanges(t *testing.T) {
	mtime := time.Unix(1e9, 0).UTC()
	ns := mtime.UnixNano()
	for _, c := range []struct {
		name  string
		state string
		back  int64  // taken back from the counters
		again string // the record stored again; "": none
	}{
		{"counted beyond its ranges", fmt.Sprintf("100 %d 0-40 counted=70", ns), 30, fmt.Sprintf("100 %d 0-40 counted=40", ns)},
		{"counted its ranges", fmt.Sprintf("100 %d 0-40 counted=40", ns), 0, ""},
		{"only started", fmt.Sprintf("100 %d counted=0", ns), 0, ""},
		{"only started, bytes counted", fmt.Sprintf("100 %d counted=25", ns), 25, fmt.Sprintf("100 %d counted=0", ns)},
		{"ranges ahead of the count", fmt.Sprintf("100 %d 0-40 counted=35", ns), -5, fmt.Sprintf("100 %d 0-40 counted=40", ns)},
		{"stored before records counted", fmt.Sprintf("100 %d 0-40", ns), 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProgress(&Worker{}, domain.Task{ID: "t", Counters: domain.Counters{BytesTransferred: 70}})
			p.loadPartials([]domain.Partial{{Src: "/f", State: c.state}})
			if got := -p.delta.BytesTransferred; got != c.back {
				t.Errorf("took back %d bytes, want %d", got, c.back)
			}
			var again string
			if r, ok := p.partials["/f"]; ok {
				again = p.record("/f", r).State
			}
			if again != c.again {
				t.Errorf("record stored again %q, want %q", again, c.again)
			}
			if pt, ok := p.restartOf("/f"); !ok || pt.Size != 100 || !pt.Modify.Equal(mtime) {
				t.Errorf("restart %+v %v, want the record's", pt, ok)
			}
		})
	}
}

// TestPartialRecordGoesWithItsFile: the partial record of a file that
// ended is deleted in the batch that stores the file's record, not in an
// earlier one while more records wait than a batch holds: between the
// two, a crash would leave the file whole at the destination with neither
// record, counted by its partial record's bytes and then again, as found
// whole, by the next run.
func TestPartialRecordGoesWithItsFile(t *testing.T) {
	store := &batches{}
	p := newProgress(&Worker{Store: store}, domain.Task{ID: "t"})
	epoch := time.Unix(0, 0)
	p.Partial("/big", engine.Partial{Size: 100, Modify: epoch})
	p.FileProgress("/big", 60)
	if err := p.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range maxBatchFiles {
		src := fmt.Sprintf("/m%d", i)
		p.FileProgress(src, 1)
		p.Done(engine.FileResult{Src: src, Dst: src, Size: 1, Outcome: engine.Transferred, Moved: 1})
	}
	p.FileProgress("/big", 40)
	p.Done(engine.FileResult{Src: "/big", Dst: "/big", Size: 100, Outcome: engine.Transferred, Moved: 100})
	store.got = nil
	if err := p.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, b := range store.got {
		gone := slices.ContainsFunc(b.Partials, func(pt domain.Partial) bool { return pt.Src == "/big" && pt.State == "" })
		recorded := slices.ContainsFunc(b.Files, func(f domain.File) bool { return f.Src == "/big" })
		if gone != recorded {
			t.Errorf("batch %d of %d: deletes /big's partial record %v, stores its record %v; want both or neither", i, len(store.got), gone, recorded)
		}
	}
}
