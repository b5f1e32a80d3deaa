package gridftp

import (
	"testing"
	"time"
)

func TestParseEntry(t *testing.T) {
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		line string
		want Entry
	}{
		{" Type=file;Size=5;Modify=20200102030405;Perm=adfrw;UNIX.mode=0644;Unique=fe00-98500d; /file.txt",
			Entry{Name: "/file.txt", Type: "file", Size: 5, Modify: mtime, Perm: "adfrw", Mode: 0o644, Unique: "fe00-98500d"}},
		// GCT 13's order and extra facts; a fractional time.
		{"Type=dir;Modify=20200102030405.123;Size=4096;Perm=cfmpel;UNIX.mode=0755;UNIX.owner=nobody;UNIX.uid=65534;UNIX.group=nogroup;UNIX.gid=65534;Unique=801-2; data",
			Entry{Name: "data", Type: "dir", Size: 4096, Modify: mtime, Perm: "cfmpel", Mode: 0o755, Unique: "801-2"}},
		{"Type=OS.unix=slink:/etc/passwd;Size=11;UNIX.slink=/etc/passwd; out",
			Entry{Name: "out", Type: "OS.unix=slink", Size: 11, Target: "/etc/passwd"}},
	} {
		got, err := ParseEntry(tc.line)
		if err != nil || got != tc.want {
			t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
		if err == nil && tc.want.Target == "" {
			if again, err := ParseEntry(got.Format()); err != nil || again != got {
				t.Errorf("Format(%+v) = %q does not parse back: %+v %v", got, got.Format(), again, err)
			}
		}
	}
	for _, bad := range []string{"", "Type=file;", "Size=-1; x", "Modify=yesterday; x"} {
		if _, err := ParseEntry(bad); err == nil {
			t.Errorf("ParseEntry(%q): no error", bad)
		}
	}
}
