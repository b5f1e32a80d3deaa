package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// profileEnv names the file a CPU profile of the whole process goes to
// (go tool pprof reads it), for any subcommand: a `ferry gridftp` server
// writes it when it stops (SIGINT or SIGTERM). Unset or empty: none.
const profileEnv = "FERRY_CPUPROFILE"

// memProfileEnv names the file a heap profile of the whole process goes
// to, for any subcommand: written when the process ends, and again (the
// heap at that moment) each time it gets SIGUSR1. Unset or empty: none.
const memProfileEnv = "FERRY_MEMPROFILE"

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

// startMemProfile writes a heap profile to path ("" for none) on each
// SIGUSR1 and returns what writes the last one when the process ends.
func startMemProfile(path string, errOut io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range usr1 {
			writeMemProfile(path, errOut)
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(usr1)
		<-done
		writeMemProfile(path, errOut)
	}
}

// writeMemProfile writes the heap profile of the process now to path,
// after a collection so that it shows what is live.
func writeMemProfile(path string, errOut io.Writer) {
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(errOut, "ferry: %s: the heap profile could not be written: %v\n", memProfileEnv, err)
	}
}
