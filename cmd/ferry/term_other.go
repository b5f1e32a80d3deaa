//go:build !linux

package main

import "os"

// noEcho is a no-op here: the terminal echoes the password.
func noEcho(*os.File) (restore func()) { return func() {} }
