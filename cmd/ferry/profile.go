package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// profileEnv names the file a CPU profile of the whole process goes to
// (go tool pprof reads it), for any subcommand: a `ferry gridftp` server
// writes it when it stops (SIGINT or SIGTERM). Unset or empty: none.
const profileEnv = "FERRY_CPUPROFILE"

// startProfile starts the CPU profile path names ("" for none) and
// returns what stops it and writes the file.
func startProfile(path string, errOut io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(errOut, "ferry: %s: the CPU profile could not start: %v\n", profileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(errOut, "ferry: %s: %v\n", profileEnv, err)
		}
	}
}
