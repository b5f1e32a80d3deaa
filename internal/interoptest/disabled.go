//go:build !interop

package interoptest

// Enabled reports whether the test binary was built with the interop tag.
const Enabled = false
