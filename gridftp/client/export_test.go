package client

// SetRemoveWindow makes RemoveTree hold at most n entries of a directory
// in memory until the returned function puts the window back.
func SetRemoveWindow(n int) func() {
	old := removeWindow
	removeWindow = n
	return func() { removeWindow = old }
}
