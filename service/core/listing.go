package core

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"ferry/service/domain"
)

// The ls operation lists a directory on its endpoint once, at its first
// page (offset 0), into a listing: its entries, filtered and, unless the
// caller asks for them unsorted, sorted by name, in an unlinked temporary
// file, with the offset of every listingIndexEvery-th entry. Later pages
// of the same listing (the same user, endpoint, login, path, filter and
// order) read it from there until no page asked for it for listingTTL (a
// directory of millions of entries on a slow link lists for longer than
// that, its pages coming all along). A sorted listing
// is made whole before its first page: a directory of millions of
// entries costs the service the memory of listingRun entries and, on
// disk, about a hundred bytes an entry. An unsorted one is written by a
// goroutine as the endpoint lists it (streamListing), and a page waits
// only for its own entries. Listings beyond listingsMax or listingBytes
// are dropped, oldest first.
const (
	listingTTL        = 5 * time.Minute
	listingRun        = 50000    // entries sorted in memory at once
	listingIndexEvery = 256      // entries between two offsets kept in memory
	listingsMax       = 64       // listings kept at once
	listingBytes      = 4 << 30  // their bytes on disk at once, but for the newest
	listingFlush      = 32 << 10 // bytes an unsorted listing buffers before it writes them (a page that wants them writes them sooner)
)

// listing is one directory listing kept for its pages.
type listing struct {
	f    *os.File  // unlinked: the entries, encoded by appendEntry
	made time.Time // when its first page asked for it
	used time.Time // when a page last asked for it (under listings.mu)

	mu       sync.Mutex
	index    []int64            // offset of entries 0, listingIndexEvery, 2*listingIndexEvery...
	total    int                // entries written to f
	size     int64              // their bytes
	buf      []byte             // entries listed after those, not yet written
	buffered int                // how many
	done     bool               // no more entries come
	err      error              // why the listing ended before its last entry
	changed  chan struct{}      // closed, and replaced, when a page's entries are listed or the listing ends
	want     int                // the fewest entries a waiting page wants; 0 when none waits
	stop     context.CancelFunc // ends the listing of an unsorted one

	refs int  // pages reading it, and its writer (under listings.mu)
	gone bool // dropped from listings: closed when refs is 0
}

// makeListing lists with list (which calls its fn with each entry, in
// any order) into a new listing, sorted by name: runs of up to run
// entries are sorted in memory and, when there are several, written to a
// temporary file and merged.
func makeListing(list func(fn func(domain.FileInfo) error) error, run int, made time.Time) (*listing, error) {
	var (
		batch []domain.FileInfo
		runs  *os.File
		bw    *bufio.Writer
		w     *countingWriter
		ends  []int64 // where each run written ends
	)
	defer func() {
		if runs != nil {
			runs.Close()
		}
	}()
	flush := func() error {
		if runs == nil {
			f, err := tempFile("ferry-ls-run-*")
			if err != nil {
				return err
			}
			runs, bw = f, bufio.NewWriterSize(f, 64<<10)
			w = &countingWriter{w: bw}
		}
		sortEntries(batch)
		var b []byte
		for _, fi := range batch {
			b = appendEntry(b[:0], fi)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		ends = append(ends, w.n)
		batch = batch[:0]
		return nil
	}
	err := list(func(fi domain.FileInfo) error {
		batch = append(batch, fi)
		if len(batch) == run {
			return flush()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if runs != nil && len(batch) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	f, err := tempFile("ferry-ls-*")
	if err != nil {
		return nil, err
	}
	l := &listing{f: f, made: made, done: true}
	out := bufio.NewWriterSize(f, 64<<10)
	if runs == nil {
		sortEntries(batch)
		err = l.write(out, inOrder(batch))
	} else {
		err = l.write(out, merged(runs, ends))
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// tempFile creates a temporary file and unlinks it: it is gone with the
// process, however that ends.
func tempFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, fmt.Errorf("listing: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("listing: %w", err)
	}
	return f, nil
}

func sortEntries(fis []domain.FileInfo) {
	slices.SortFunc(fis, func(a, b domain.FileInfo) int { return strings.Compare(a.Name, b.Name) })
}

// write writes the entries entries yields (an error ends them) to w,
// indexing them.
func (l *listing) write(w io.Writer, entries iter.Seq2[domain.FileInfo, error]) error {
	var b []byte
	for fi, err := range entries {
		if err != nil {
			return err
		}
		if l.total%listingIndexEvery == 0 {
			l.index = append(l.index, l.size)
		}
		b = appendEntry(b[:0], fi)
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		l.total++
		l.size += int64(len(b))
	}
	return nil
}

// streamListing starts a goroutine that lists with list, under ctx
// without its cancellation, into a new listing, in the order list gives
// the entries; the goroutine holds a reference to it until the listing
// ends, and dropping it from ls (no page for listingTTL) ends the listing.
func (ls *listings) streamListing(ctx context.Context, list func(ctx context.Context, fn func(domain.FileInfo) error) error, made time.Time) (*listing, error) {
	f, err := tempFile("ferry-ls-*")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &listing{f: f, made: made, changed: make(chan struct{}), stop: cancel, refs: 1}
	go func() {
		defer ls.release(l)
		defer cancel()
		l.end(list(ctx, l.add))
	}()
	return l, nil
}

// add buffers an entry of an unsorted listing, writing the buffer when
// it holds listingFlush bytes, and wakes the pages that wait for it.
func (l *listing) add(fi domain.FileInfo) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return l.err
	}
	n := l.total + l.buffered
	if n%listingIndexEvery == 0 {
		l.index = append(l.index, l.size+int64(len(l.buf)))
	}
	l.buf = appendEntry(l.buf, fi)
	l.buffered++
	if len(l.buf) >= listingFlush {
		l.writeBuffered()
	}
	if l.want > 0 && n+1 >= l.want {
		l.wake()
	}
	return l.err
}

// end ends an unsorted listing; err, unless nil, is why it ended before
// its last entry.
func (l *listing) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done, l.err = true, err
	}
	l.wake()
}

// wake wakes the pages waiting on l (l.mu held).
func (l *listing) wake() {
	close(l.changed)
	l.changed, l.want = make(chan struct{}), 0
}

// writeBuffered writes the buffered entries to f (l.mu held); a failure
// ends the listing.
func (l *listing) writeBuffered() {
	if l.buffered == 0 {
		return
	}
	if _, err := l.f.Write(l.buf); err != nil {
		l.done, l.err = true, fmt.Errorf("listing: %w", err)
		l.buf, l.buffered = nil, 0
		l.wake()
		return
	}
	l.total += l.buffered
	l.size += int64(len(l.buf))
	l.buf, l.buffered = l.buf[:0], 0
}

// page returns up to limit entries from offset on, once they are listed
// (or the listing has ended), and the entries listed then: more than
// offset plus those returned when there are more. It returns the error
// that ended the listing when the page reaches it, and ctx's when ctx
// ends first.
func (l *listing) page(ctx context.Context, offset, limit int) ([]domain.FileInfo, int, error) {
	need := offset + limit + 1
	l.mu.Lock()
	for l.total+l.buffered < need && !l.done {
		if l.want == 0 || need < l.want {
			l.want = need
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
		l.mu.Lock()
	}
	if l.total < need {
		l.writeBuffered()
	}
	total, size, err := l.total, l.size, l.err
	var at int64
	if offset < total {
		at = l.index[offset/listingIndexEvery]
	}
	l.mu.Unlock()
	if total < need && err != nil {
		return nil, 0, err
	}
	if offset >= total {
		return nil, total, nil
	}
	i := offset / listingIndexEvery
	r := bufio.NewReader(io.NewSectionReader(l.f, at, size-at))
	for range offset - i*listingIndexEvery {
		if _, err := readEntry(r); err != nil {
			return nil, 0, err
		}
	}
	out := make([]domain.FileInfo, min(limit, total-offset))
	for j := range out {
		fi, err := readEntry(r)
		if err != nil {
			return nil, 0, err
		}
		out[j] = fi
	}
	return out, total, nil
}

// bytes is the size of l's entries listed so far.
func (l *listing) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size + int64(len(l.buf))
}

// inOrder yields the entries of fis.
func inOrder(fis []domain.FileInfo) iter.Seq2[domain.FileInfo, error] {
	return func(yield func(domain.FileInfo, error) bool) {
		for _, fi := range fis {
			if !yield(fi, nil) {
				return
			}
		}
	}
}

// merged yields the entries of the sorted runs of f, which end at ends,
// in name order.
func merged(f *os.File, ends []int64) iter.Seq2[domain.FileInfo, error] {
	return func(yield func(domain.FileInfo, error) bool) {
		h := &runHeap{}
		var start int64
		for _, end := range ends {
			r := bufio.NewReaderSize(io.NewSectionReader(f, start, end-start), 16<<10)
			start = end
			fi, err := readEntry(r)
			if err != nil {
				yield(fi, err)
				return
			}
			h.runs = append(h.runs, runHead{fi, r})
		}
		heap.Init(h)
		for len(h.runs) > 0 {
			top := &h.runs[0]
			if !yield(top.fi, nil) {
				return
			}
			fi, err := readEntry(top.r)
			switch {
			case errors.Is(err, io.EOF):
				heap.Pop(h)
			case err != nil:
				yield(fi, err)
				return
			default:
				top.fi = fi
				heap.Fix(h, 0)
			}
		}
	}
}

// runHead is the next entry of a run being merged.
type runHead struct {
	fi domain.FileInfo
	r  *bufio.Reader
}

// runHeap orders runs by their next entry's name.
type runHeap struct{ runs []runHead }

func (h *runHeap) Len() int           { return len(h.runs) }
func (h *runHeap) Less(i, j int) bool { return h.runs[i].fi.Name < h.runs[j].fi.Name }
func (h *runHeap) Swap(i, j int)      { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap) Push(x any)         { h.runs = append(h.runs, x.(runHead)) }
func (h *runHeap) Pop() any {
	last := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return last
}

// countingWriter counts what it writes.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		err = fmt.Errorf("listing: %w", err)
	}
	return n, err
}

// appendEntry appends fi, encoded, to b: its strings each after its
// length, then its size and time.
func appendEntry(b []byte, fi domain.FileInfo) []byte {
	for _, s := range []string{fi.Name, fi.Type, fi.Permissions, fi.User, fi.Group} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, fi.Size)
	if fi.Modified.IsZero() {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendVarint(b, fi.Modified.Unix())
	return binary.AppendUvarint(b, uint64(fi.Modified.Nanosecond()))
}

// readEntry reads an entry appendEntry encoded; io.EOF at the end.
func readEntry(r *bufio.Reader) (domain.FileInfo, error) {
	var fi domain.FileInfo
	var err error
	str := func() string {
		if err != nil {
			return ""
		}
		var n uint64
		if n, err = binary.ReadUvarint(r); err != nil {
			return ""
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return string(b)
	}
	fi.Name = str()
	if errors.Is(err, io.EOF) {
		return fi, io.EOF
	}
	fi.Type, fi.Permissions, fi.User, fi.Group = str(), str(), str(), str()
	if err == nil {
		fi.Size, err = binary.ReadVarint(r)
	}
	var timed uint64
	if err == nil {
		timed, err = binary.ReadUvarint(r)
	}
	if err == nil && timed == 1 {
		var sec int64
		var nsec uint64
		if sec, err = binary.ReadVarint(r); err == nil {
			nsec, err = binary.ReadUvarint(r)
		}
		fi.Modified = time.Unix(sec, int64(nsec)).UTC()
	}
	if err != nil {
		return fi, fmt.Errorf("listing: %w", noEOF(err))
	}
	return fi, nil
}

// noEOF turns an end of data inside an entry into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// listings are the listings kept for their pages, by key.
type listings struct {
	mu sync.Mutex
	m  map[string]*listing
}

// get returns the listing of key, kept and asked for within listingTTL of
// now, or, when there is none or fresh is set, a new one made by list;
// put it back with release.
func (ls *listings) get(key string, fresh bool, now time.Time, list func() (*listing, error)) (*listing, error) {
	ls.mu.Lock()
	ls.expire(now)
	if l, ok := ls.m[key]; ok && !fresh {
		l.refs++
		l.used = now
		ls.mu.Unlock()
		return l, nil
	}
	ls.mu.Unlock()
	l, err := list()
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]*listing{}
	}
	if old, ok := ls.m[key]; ok {
		ls.drop(key, old)
	}
	ls.m[key] = l
	l.refs++
	l.used = now
	ls.trim(key)
	return l, nil
}

// release puts back a listing get returned.
func (ls *listings) release(l *listing) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l.refs--; l.refs == 0 && l.gone {
		l.f.Close()
	}
}

// expire drops the listings no page asked for within listingTTL of now.
func (ls *listings) expire(now time.Time) {
	for k, l := range ls.m {
		if now.Sub(l.used) >= listingTTL {
			ls.drop(k, l)
		}
	}
}

// trim drops the oldest listings but keep while there are more than
// listingsMax or they take more than listingBytes.
func (ls *listings) trim(keep string) {
	for {
		var (
			n      int
			bytes  int64
			oldest string
		)
		for k, l := range ls.m {
			n++
			bytes += l.bytes()
			if k != keep && (oldest == "" || l.made.Before(ls.m[oldest].made)) {
				oldest = k
			}
		}
		if oldest == "" || n <= listingsMax && bytes <= listingBytes {
			return
		}
		ls.drop(oldest, ls.m[oldest])
	}
}

// drop forgets the listing l of key, closing it unless a page reads it.
func (ls *listings) drop(key string, l *listing) {
	delete(ls.m, key)
	l.gone = true
	if l.stop != nil {
		l.stop()
	}
	if l.refs == 0 {
		l.f.Close()
	}
}
