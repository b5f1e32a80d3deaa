package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
)

// TestLsJSON: the listing ls -F json writes as its entries come is one
// JSON document, the api.FileList of those entries.
func TestLsJSON(t *testing.T) {
	mod := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(n, " entries"), func(t *testing.T) {
			var b strings.Builder
			j := &lsJSON{w: bufio.NewWriter(&b)}
			want := api.FileList{DataType: "file_list", Endpoint: "e<1>", Path: "/a \"b\"", Data: []api.File{},
				PageInfo: api.PageInfo{Length: n, Total: n}}
			j.begin(api.FileList{Endpoint: want.Endpoint, Path: want.Path, PageInfo: api.PageInfo{Total: 99}})
			for i := range n {
				f := api.File{DataType: "file", Name: fmt.Sprintf("f%d&", i), Type: "file", Size: int64(i), LastModified: mod}
				j.entry(f)
				want.Data = append(want.Data, f)
			}
			if err := j.end(); err != nil {
				t.Fatal(err)
			}
			var got api.FileList
			if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b.String())
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}
