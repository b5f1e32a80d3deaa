package api_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"ferry/service/api"
	"ferry/service/domain"
)

// What the client encodes, the server reads back.
func TestQueryRoundTrip(t *testing.T) {
	for _, q := range []api.TaskQuery{
		{},
		{Page: api.Page{Limit: 5, Offset: 10}, Status: []string{"ACTIVE", "INACTIVE"}, Type: []string{"TRANSFER"}, Label: "nightly run", Oldest: true},
		{Label: "a:b,c"},
	} {
		got, err := api.ParseTaskQuery(q.Values())
		if err != nil || !reflect.DeepEqual(got, q) {
			t.Errorf("task query %+v → %s → %+v, %v", q, q.Values().Encode(), got, err)
		}
	}
	for _, q := range []api.EndpointQuery{
		{Scope: api.ScopeAll},
		{Page: api.Page{Limit: 1}, Text: "alice#", Scope: api.ScopeMine},
	} {
		got, err := api.ParseEndpointQuery(q.Values())
		if err != nil || got != q {
			t.Errorf("endpoint query %+v → %+v, %v", q, got, err)
		}
	}
	for _, q := range []api.ListQuery{{}, {Path: "/a b/", ShowHidden: true, Page: api.Page{Offset: 3}},
		{Names: []api.NameFilter{{Op: "~", Patterns: []string{"*.txt", "a?"}}, {Op: "!=", Patterns: []string{"b"}}}, Types: []string{"file", "link"}},
		{ShowHidden: true, Unsorted: true}} {
		got, err := api.ParseListQuery(q.Values())
		if err != nil || !reflect.DeepEqual(got, q) {
			t.Errorf("list query %+v → %+v, %v", q, got, err)
		}
	}
	for _, q := range []api.MarkerQuery{{}, {Marker: 1 << 40, Limit: 7}} {
		got, err := api.ParseMarkerQuery(q.Values())
		if err != nil || got != q {
			t.Errorf("marker query %+v → %+v, %v", q, got, err)
		}
	}
}

func TestQueryDefaults(t *testing.T) {
	q, err := api.ParseTaskQuery(url.Values{"filter": {"status:active,failed/type:delete"}, "orderby": {"request_time"}})
	if err != nil || !reflect.DeepEqual(q.Status, []string{"ACTIVE", "FAILED"}) || !reflect.DeepEqual(q.Type, []string{"DELETE"}) || !q.Oldest {
		t.Errorf("lower case filter, orderby without direction: %+v, %v", q, err)
	}
	if e, err := api.ParseEndpointQuery(url.Values{}); err != nil || e.Scope != api.ScopeAll {
		t.Errorf("default scope: %+v, %v", e, err)
	}
	if l, err := api.ParseListQuery(url.Values{}); err != nil || !l.ShowHidden {
		t.Errorf("show_hidden defaults to true: %+v, %v", l, err)
	}
	for _, o := range []string{"name", "NAME asc", "none", "None"} {
		l, err := api.ParseListQuery(url.Values{"orderby": {o}})
		if want := strings.EqualFold(o, "none"); err != nil || l.Unsorted != want {
			t.Errorf("list orderby=%s: %+v, %v; want unsorted %v", o, l, err, want)
		}
	}
}

func TestQueryRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(url.Values) error
		raw   string
	}{
		{"task", taskQ, "limit=-1"},
		{"task", taskQ, "limit=ten"},
		{"task", taskQ, "offset=1.5"},
		{"task", taskQ, "filter=status:DONE"},
		{"task", taskQ, "filter=type:COPY"},
		{"task", taskQ, "filter=user:bob"},
		{"task", taskQ, "filter=status:"},
		{"task", taskQ, "filter=ACTIVE"},
		{"task", taskQ, "orderby=label"},
		{"endpoint", endpointQ, "filter_scope=everyone"},
		{"endpoint", endpointQ, "offset=-2"},
		{"list", listQ, "show_hidden=perhaps"},
		{"list", listQ, "filter=name:"},
		{"list", listQ, "filter=name:~"},
		{"list", listQ, "filter=name:~[a"},
		{"list", listQ, "filter=size:10"},
		{"list", listQ, "filter=type:socket"},
		{"list", listQ, "orderby=size"},
		{"list", listQ, "orderby=name+DESC"},
		{"marker", markerQ, "marker=abc"},
		{"marker", markerQ, "marker=-1"},
	} {
		v, err := url.ParseQuery(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.parse(v); domain.ErrorCode(err) != domain.EInvalid {
			t.Errorf("%s query %s: %v, want a BadRequest error", tc.name, tc.raw, err)
		}
	}
}

func taskQ(v url.Values) error     { _, err := api.ParseTaskQuery(v); return err }
func endpointQ(v url.Values) error { _, err := api.ParseEndpointQuery(v); return err }
func listQ(v url.Values) error     { _, err := api.ParseListQuery(v); return err }
func markerQ(v url.Values) error   { _, err := api.ParseMarkerQuery(v); return err }

// TestListFilter: the one rule of what a listing shows (show_hidden and
// filter, as globus-cli's ls --filter writes it).
func TestListFilter(t *testing.T) {
	names := []string{"a.txt", "b.TXT", "tmp1", "tmp-x.txt", ".hidden.txt", "dir"}
	for _, tc := range []struct {
		filter string // the filter parameter
		hidden bool
		want   string
	}{
		{"", true, "a.txt b.TXT tmp1 tmp-x.txt .hidden.txt dir"},
		{"", false, "a.txt b.TXT tmp1 tmp-x.txt dir"},
		{"name:~*.txt", true, "a.txt tmp-x.txt .hidden.txt"},
		{"name:~*.txt", false, "a.txt tmp-x.txt"},
		{"name:!~tmp*", false, "a.txt b.TXT dir"},
		{"name:=tmp1", false, "tmp1"},
		{"name:tmp1", false, "tmp1"},
		{"name:=tmp1,dir", false, "tmp1 dir"},
		{"name:!=tmp1,dir", false, "a.txt b.TXT tmp-x.txt"},
		{"name:~*.txt,*.TXT", false, "a.txt b.TXT tmp-x.txt"},
		{"name:~*.txt/name:!~tmp*", false, "a.txt"},
		{"name:~[ab].*", false, "a.txt b.TXT"},
		{"type:dir", true, "dir"},
		{"type:file/name:~tmp*", true, "tmp1 tmp-x.txt"},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			q, err := api.ParseListQuery(url.Values{"filter": {tc.filter}, "show_hidden": {fmt.Sprint(tc.hidden)}})
			if tc.filter == "" {
				q, err = api.ParseListQuery(url.Values{"show_hidden": {fmt.Sprint(tc.hidden)}})
			}
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, n := range names {
				typ := "file"
				if n == "dir" {
					typ = "dir"
				}
				if q.Keeps(n, typ) {
					kept = append(kept, n)
				}
			}
			if got := strings.Join(kept, " "); got != tc.want {
				t.Fatalf("kept %q, want %q", got, tc.want)
			}
		})
	}
}
