// Package plural writes counts of things in English: "1 file", "2 files",
// "1.5 GiB", for the messages users read (the CLI's output, a task's
// events, the engine's reasons).
package plural

import (
	"fmt"
	"strconv"
	"strings"
)

// Count is n and noun, in the plural unless n is 1: "1 file", "2 files",
// "0 batches", "2 directories".
func Count[N ~int | ~int64](n N, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "x"):
		noun += "es"
	case strings.HasSuffix(noun, "y") && !strings.ContainsAny(noun[max(0, len(noun)-2):len(noun)-1], "aeiou"):
		noun = noun[:len(noun)-1] + "ies"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// Bytes is n bytes in binary units, to one decimal: "512 B", "1.0 KiB",
// "1.5 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
