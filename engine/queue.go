package engine

import (
	"context"
	"sync"
)

// queue is the units waiting for a session pair; retries come back to it.
// It is closed when every file is final (or the run is cancelled).
type queue struct {
	mu     sync.Mutex
	items  []*unit
	wake   chan struct{} // closed and replaced when items arrive
	shut   chan struct{}
	isShut bool
}

func (q *queue) init() {
	if q.wake == nil {
		q.wake, q.shut = make(chan struct{}), make(chan struct{})
	}
}

func (q *queue) push(u *unit) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	if q.isShut {
		return
	}
	q.items = append(q.items, u)
	close(q.wake)
	q.wake = make(chan struct{})
}

// pushFront puts u back at the head of the queue.
func (q *queue) pushFront(u *unit) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	if q.isShut {
		return
	}
	q.items = append([]*unit{u}, q.items...)
	close(q.wake)
	q.wake = make(chan struct{})
}

// pop takes the next unit; with wait it blocks until one comes or the queue
// closes (then nil).
func (q *queue) pop(ctx context.Context, wait bool) *unit {
	for {
		q.mu.Lock()
		q.init()
		if len(q.items) > 0 {
			u := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return u
		}
		wake, shut := q.wake, q.shut
		q.mu.Unlock()
		if !wait {
			return nil
		}
		select {
		case <-wake:
		case <-shut:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	if !q.isShut {
		q.isShut = true
		close(q.shut)
	}
}

func (q *queue) done() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.isShut
}

func (q *queue) closed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	return q.shut
}

// len is the number of units waiting.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
