package server

import (
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
)

// markers sends 112 performance markers every interval while data moves;
// with rcv (a receive) it also sends one at the start and 111 range markers,
// and the final pair when stopped.
func (ss *session) markers(interval time.Duration, bytes *atomic.Int64, rcv *gridftp.Receiver) (stop func()) {
	perf := func() {
		ss.send(gridftp.PerfMarker{Time: time.Now(), Bytes: bytes.Load(), StripeCount: 1}.Reply())
	}
	ranges := func() {
		if rcv != nil {
			if p := rcv.TakePending(); !p.Empty() {
				ss.send(gridftp.RangeMarkerReply(p))
			}
		}
	}
	if rcv != nil {
		perf()
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				perf()
				ranges()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		if rcv != nil {
			perf()
			ranges()
		}
	}
}
