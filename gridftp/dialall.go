package gridftp

import (
	"context"
	"net"
	"sync"
)

// DialAll opens n data connections at once, dial(ctx, i) for i in [0, n),
// and returns them in order. A session's parallel streams each cost a
// connect and, when authenticated, a TLS handshake: a round trip or two
// each, which one after another would add up on a long link. On a failure
// it stops the other dials, closes what they made and returns the failure
// that came first (the others may only be that stop).
func DialAll(ctx context.Context, n int, dial func(ctx context.Context, i int) (net.Conn, error)) ([]net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns := make([]net.Conn, n)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(ctx, i)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	if first != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, first
	}
	return conns, nil
}
