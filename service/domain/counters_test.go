package domain

import "testing"

func TestDeleteSummary(t *testing.T) {
	for _, c := range []struct {
		c    Counters
		want string
	}{
		{Counters{Files: 100, Directories: 1, FilesTransferred: 1}, "1 path: 100 files and 1 directory deleted, 0 missing, 0 failed"},
		{Counters{Files: 1, FilesTransferred: 1}, "1 path: 1 file deleted, 0 missing, 0 failed"},
		{Counters{Files: 4, Directories: 2, FilesTransferred: 2, FilesSkipped: 1}, "3 paths: 4 files and 2 directories deleted, 1 missing, 0 failed"},
		{Counters{Files: 3, Directories: 1, FilesFailed: 1}, "1 path: 3 files and 1 directory deleted, 0 missing, 1 failed"},
		{Counters{FilesSkipped: 1}, "1 path: 0 files deleted, 1 missing, 0 failed"},
	} {
		if got := c.c.DeleteSummary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}
