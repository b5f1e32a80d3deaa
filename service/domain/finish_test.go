package domain

import (
	"slices"
	"testing"

	"ferry/internal/synclevel"
)

func TestFinishCommands(t *testing.T) {
	base := Task{Type: TypeTransfer, SrcEndpoint: "S", DstEndpoint: "D", Options: Options{VerifyChecksum: true}}
	with := func(f func(*Task)) Task {
		t := base
		f(&t)
		return t
	}
	for _, c := range []struct {
		name string
		task Task
		want []string
		more int
	}{
		{"a tree", with(func(t *Task) { t.Items = []Item{{Src: "/a", Dst: "/b", Recursive: true}} }),
			[]string{"ferry transfer S:/a D:/b -r --sync-level size"}, 0},
		{"options and quoting", with(func(t *Task) {
			t.Items = []Item{{Src: "/my data", Dst: "/x"}}
			t.Options = Options{SyncLevel: synclevel.Mtime, PreserveTimestamp: true, Tar: "never", ChecksumAlgorithm: "MD5",
				FilterRules: []FilterRule{{Method: "exclude", Name: "*.tmp"}}}
		}), []string{"ferry transfer 'S:/my data' D:/x --sync-level size --no-verify-checksum --checksum-algorithm MD5 " +
			"--preserve-timestamp --tar never --exclude '*.tmp'"}, 0},
		{"many items", with(func(t *Task) {
			t.Items = []Item{{Src: "/1", Dst: "/1"}, {Src: "/2", Dst: "/2"}, {Src: "/3", Dst: "/3"}, {Src: "/4", Dst: "/4"}, {Src: "/5", Dst: "/5"}}
		}), []string{"ferry transfer S:/1 D:/1 --sync-level size", "ferry transfer S:/2 D:/2 --sync-level size",
			"ferry transfer S:/3 D:/3 --sync-level size"}, 2},
		{"a delete task", with(func(t *Task) { t.Type, t.Items = TypeDelete, []Item{{Src: "/a"}} }), []string{"ferry rm S:/a"}, 0},
		{"a recursive delete of two paths", with(func(t *Task) {
			t.Type, t.Items = TypeDelete, []Item{{Src: "/a", Recursive: true}, {Src: "/my b", Recursive: true}}
			t.Options.IgnoreMissing = true
		}), []string{"ferry rm -r --ignore-missing S:/a 'S:/my b'"}, 0},
		{"several destinations", with(func(t *Task) {
			t.Items, t.Destinations = []Item{{Src: "/a", Dst: "/a"}}, []Destination{{Endpoint: "D"}, {Endpoint: "E"}}
		}), nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, more := FinishCommands(c.task)
			if !slices.Equal(got, c.want) || more != c.more {
				t.Errorf("got %q and %d more, want %q and %d more", got, more, c.want, c.more)
			}
		})
	}
}
