package gridftp

import "time"

// SetGrowthClock sets g's clock: when the send had moved the given bytes.
func SetGrowthClock(g *Growth, clock func(moved int64) time.Time) { g.clock = clock }
