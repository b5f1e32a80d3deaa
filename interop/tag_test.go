//go:build !interop

package interop

import (
	"testing"

	"ferry/internal/interoptest"
)

// TestInterop stands for the suite when it is not built (no interop tag):
// it skips, saying how to run it, or fails under FERRY_INTEROP=required.
func TestInterop(t *testing.T) { interoptest.Need(t) }
