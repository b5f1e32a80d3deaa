package engine

// SetDirWindows sets the window in which directories are placed and the
// size from which a directory is huge (listWindow, hugeDir), and returns
// what restores them.
func SetDirWindows(window, huge int) (restore func()) {
	w, h := listWindow, hugeDir
	listWindow, hugeDir = window, huge
	return func() { listWindow, hugeDir = w, h }
}
