package gridftp

import (
	"sync"
)

// BufferPool hands out block buffers with room for a MODE E header in
// front, so that header and payload go out in one write and no block
// allocates. Send and Receiver hold a buffer only while a block moves
// through it, so that a pool made with Limit bounds the memory of a
// transfer whatever its streams.
type BufferPool struct {
	block int
	pool  *sync.Pool
	slots chan struct{} // one per buffer out, for a Limit pool; nil: no limit
}

// NewBufferPool makes a pool of buffers for blocks of size bytes.
func NewBufferPool(size int) *BufferPool { return &BufferPool{block: size, pool: &sync.Pool{}} }

// Limit returns a pool that takes its buffers from p but has at most n
// out at once: Get waits until one is put back.
func (p *BufferPool) Limit(n int) *BufferPool {
	return &BufferPool{block: p.block, pool: p.pool, slots: make(chan struct{}, max(n, 1))}
}

// BlockSize is the payload size of the pool's buffers.
func (p *BufferPool) BlockSize() int { return p.block }

// Get returns a buffer of HeaderLen+BlockSize bytes.
func (p *BufferPool) Get() *[]byte {
	if p.slots != nil {
		p.slots <- struct{}{}
	}
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, HeaderLen+p.block)
	return &b
}

// Put gives a buffer back.
func (p *BufferPool) Put(b *[]byte) {
	p.pool.Put(b)
	if p.slots != nil {
		<-p.slots
	}
}
