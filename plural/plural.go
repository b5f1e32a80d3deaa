// Package plural writes counts of things in English: "1 file", "2 files",
// for the messages users read (the CLI's output, a task's events).
package plural

import (
	"fmt"
	"strings"
)

// Count is n and noun, in the plural unless n is 1: "1 file", "2 files",
// "0 batches".
func Count[N ~int | ~int64](n N, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "x"):
		noun += "es"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}
