package api

import (
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"ferry/service/domain"
)

// Query parameters of the list routes. The client encodes them with
// Values, the server reads them with the Parse functions; malformed ones
// are an *domain.Error with code BadRequest.

// Page is offset paging: limit (0: the server's default, 100; at most
// 1000) and offset.
type Page struct{ Limit, Offset int }

// Values encodes p.
func (p Page) Values() url.Values {
	v := url.Values{}
	if p.Limit != 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Offset != 0 {
		v.Set("offset", strconv.Itoa(p.Offset))
	}
	return v
}

// MaxOffset is the largest offset of a page: far past any list, and
// small enough that offset plus limit cannot overflow an int.
const MaxOffset = 1_000_000_000

// ParsePage reads limit and offset.
func ParsePage(v url.Values) (Page, error) {
	var p Page
	var err error
	if p.Limit, err = nonNegative(v, "limit"); err != nil {
		return p, err
	}
	p.Offset, err = nonNegative(v, "offset")
	if err == nil && p.Offset > MaxOffset {
		err = domain.Errorf(domain.EInvalid, "offset=%d: want at most %d", p.Offset, MaxOffset)
	}
	return p, err
}

func nonNegative(v url.Values, key string) (int, error) {
	s := v.Get(key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, domain.Errorf(domain.EInvalid, "%s=%q: want a non-negative integer", key, s)
	}
	return n, nil
}

// TaskQuery selects tasks in GET /task_list. On the wire the filters are
// one parameter, filter=status:ACTIVE,INACTIVE/type:TRANSFER/label:text,
// and the order is orderby=request_time ASC|DESC (newest first when
// absent).
type TaskQuery struct {
	Page
	Status []string // any of ACTIVE, INACTIVE, SUCCEEDED, FAILED
	Type   []string // any of TRANSFER, DELETE
	Label  string   // substring of the label
	Oldest bool     // oldest first
}

// Values encodes q.
func (q TaskQuery) Values() url.Values {
	v := q.Page.Values()
	var f []string
	if len(q.Status) > 0 {
		f = append(f, "status:"+strings.Join(q.Status, ","))
	}
	if len(q.Type) > 0 {
		f = append(f, "type:"+strings.Join(q.Type, ","))
	}
	if q.Label != "" {
		f = append(f, "label:"+q.Label)
	}
	if len(f) > 0 {
		v.Set("filter", strings.Join(f, "/"))
	}
	if q.Oldest {
		v.Set("orderby", "request_time ASC")
	}
	return v
}

// ParseTaskQuery reads a TaskQuery.
func ParseTaskQuery(v url.Values) (TaskQuery, error) {
	var q TaskQuery
	var err error
	if q.Page, err = ParsePage(v); err != nil {
		return q, err
	}
	if f := v.Get("filter"); f != "" {
		parts, err := filterParts(f)
		if err != nil {
			return q, err
		}
		for _, part := range parts {
			key, val := part[0], part[1]
			switch key {
			case "status":
				q.Status, err = oneOf(key, val, domain.StatusActive, domain.StatusInactive, domain.StatusSucceeded, domain.StatusFailed)
			case "type":
				q.Type, err = oneOf(key, val, domain.TypeTransfer, domain.TypeDelete)
			case "label":
				q.Label = val
			default:
				err = domain.Errorf(domain.EInvalid, "filter %q: unknown key %q (want status, type or label)", f, key)
			}
			if err != nil {
				return q, err
			}
		}
	}
	switch o := strings.ToUpper(strings.Join(strings.Fields(v.Get("orderby")), " ")); o {
	case "", "REQUEST_TIME DESC":
	case "REQUEST_TIME", "REQUEST_TIME ASC":
		q.Oldest = true
	default:
		return q, domain.Errorf(domain.EInvalid, "orderby=%q: want request_time ASC or request_time DESC", v.Get("orderby"))
	}
	return q, nil
}

// filterParts splits a filter parameter into its key:value parts, joined
// by /.
func filterParts(f string) ([][2]string, error) {
	var out [][2]string
	for _, part := range strings.Split(f, "/") {
		key, val, ok := strings.Cut(part, ":")
		if !ok || val == "" {
			return nil, domain.Errorf(domain.EInvalid, "filter %q: want key:value parts joined by /", f)
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// oneOf splits a comma-separated filter value whose parts must be among
// allowed (compared in upper case).
func oneOf(key, val string, allowed ...string) ([]string, error) {
	parts := strings.Split(strings.ToUpper(val), ",")
	for _, p := range parts {
		if !slices.Contains(allowed, p) {
			return nil, domain.Errorf(domain.EInvalid, "filter %s:%s: %q is not one of %s", key, val, p, strings.Join(allowed, ", "))
		}
	}
	return parts, nil
}

// Endpoint search scopes.
const (
	ScopeAll  = "all"          // the caller's endpoints and public ones
	ScopeMine = "my-endpoints" // the caller's only
)

// EndpointQuery selects endpoints in GET /endpoint_search:
// filter_fulltext, filter_scope (all when absent), limit, offset.
type EndpointQuery struct {
	Page
	Text  string // substring of owner#name or the description
	Scope string // ScopeAll or ScopeMine
}

// Values encodes q.
func (q EndpointQuery) Values() url.Values {
	v := q.Page.Values()
	if q.Text != "" {
		v.Set("filter_fulltext", q.Text)
	}
	if q.Scope != "" {
		v.Set("filter_scope", q.Scope)
	}
	return v
}

// ParseEndpointQuery reads an EndpointQuery.
func ParseEndpointQuery(v url.Values) (EndpointQuery, error) {
	q := EndpointQuery{Text: v.Get("filter_fulltext"), Scope: v.Get("filter_scope")}
	if q.Scope == "" {
		q.Scope = ScopeAll
	}
	if err := CheckScope(q.Scope); err != nil {
		return q, err
	}
	var err error
	q.Page, err = ParsePage(v)
	return q, err
}

// CheckScope refuses an endpoint search scope other than ScopeAll and
// ScopeMine.
func CheckScope(scope string) error {
	if scope != ScopeAll && scope != ScopeMine {
		return domain.Errorf(domain.EInvalid, "filter scope %q: want %s or %s", scope, ScopeAll, ScopeMine)
	}
	return nil
}

// ListQuery selects a directory listing in GET
// /operation/endpoint/{id}/ls: path (the endpoint's default directory when
// empty), show_hidden, limit, offset, and filter, as in the transfer API:
// key:value parts joined by / that an entry must all pass, name:PATTERN
// (see NameFilter) and type:file,dir,link; and orderby, name or none.
type ListQuery struct {
	Page
	Path string
	// ShowHidden lists names starting with '.'. On the wire show_hidden
	// defaults to true, as in the transfer API; Values always sends it.
	ShowHidden bool
	Names      []NameFilter // each must pass
	Types      []string     // any of file, dir, link; none: all
	// Unsorted lists the entries in the order the endpoint lists them,
	// as they come (orderby=none), rather than sorted by name
	// (orderby=name, the default).
	Unsorted bool
}

// Values encodes q.
func (q ListQuery) Values() url.Values {
	v := q.Page.Values()
	if q.Path != "" {
		v.Set("path", q.Path)
	}
	v.Set("show_hidden", strconv.FormatBool(q.ShowHidden))
	var f []string
	for _, n := range q.Names {
		f = append(f, "name:"+n.String())
	}
	if len(q.Types) > 0 {
		f = append(f, "type:"+strings.Join(q.Types, ","))
	}
	if len(f) > 0 {
		v.Set("filter", strings.Join(f, "/"))
	}
	if q.Unsorted {
		v.Set("orderby", "none")
	}
	return v
}

// ParseListQuery reads a ListQuery.
func ParseListQuery(v url.Values) (ListQuery, error) {
	q := ListQuery{Path: v.Get("path"), ShowHidden: true}
	if s := v.Get("show_hidden"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, domain.Errorf(domain.EInvalid, "show_hidden=%q: want true or false", s)
		}
		q.ShowHidden = b
	}
	if f := v.Get("filter"); f != "" {
		parts, err := filterParts(f)
		if err != nil {
			return q, err
		}
		for _, part := range parts {
			switch key, val := part[0], part[1]; key {
			case "name":
				n, err := ParseNameFilter(val)
				if err != nil {
					return q, err
				}
				q.Names = append(q.Names, n)
			case "type":
				types, err := oneOf(key, strings.ToUpper(val), "FILE", "DIR", "LINK")
				if err != nil {
					return q, err
				}
				for _, t := range types {
					q.Types = append(q.Types, strings.ToLower(t))
				}
			default:
				return q, domain.Errorf(domain.EInvalid, "filter %q: unknown key %q (want name or type)", f, key)
			}
		}
	}
	switch o := strings.ToUpper(strings.Join(strings.Fields(v.Get("orderby")), " ")); o {
	case "", "NAME", "NAME ASC":
	case "NONE":
		q.Unsorted = true
	default:
		return q, domain.Errorf(domain.EInvalid, "orderby=%q: want name (the default) or none (as the endpoint lists them)", v.Get("orderby"))
	}
	var err error
	q.Page, err = ParsePage(v)
	return q, err
}

// Keeps reports whether the listing q asks for shows the entry name of
// type typ (file, dir or link): the one rule of show_hidden and filter.
func (q ListQuery) Keeps(name, typ string) bool {
	if !q.ShowHidden && strings.HasPrefix(name, ".") {
		return false
	}
	if len(q.Types) > 0 && !slices.Contains(q.Types, typ) {
		return false
	}
	for _, n := range q.Names {
		if !n.Match(name) {
			return false
		}
	}
	return true
}

// NameFilter selects names in a listing, as the filter name:PATTERN of
// the transfer API (and globus-cli's ls --filter PATTERN) does: PATTERN is
// an operator then names or globs, comma-separated. "=a,b" keeps a and b;
// "!=a" all but a; "~*.txt" the names the glob matches (* ? [...], as
// path.Match); "!~tmp*" those it does not. Without an operator, "=".
type NameFilter struct {
	Op       string   // =, !=, ~ or !~
	Patterns []string // names (= and !=) or globs (~ and !~)
}

// nameOps are NameFilter's operators, longest first.
var nameOps = []string{"!=", "!~", "=", "~"}

// ParseNameFilter reads a NameFilter from PATTERN.
func ParseNameFilter(pattern string) (NameFilter, error) {
	f, given := NameFilter{Op: "="}, pattern
	for _, op := range nameOps {
		if rest, ok := strings.CutPrefix(pattern, op); ok {
			f.Op, pattern = op, rest
			break
		}
	}
	if pattern == "" || strings.Contains(pattern, "/") {
		return f, domain.Errorf(domain.EInvalid, "name filter %q: want =NAME, !=NAME, ~GLOB or !~GLOB, without /", given)
	}
	f.Patterns = strings.Split(pattern, ",")
	for _, p := range f.Patterns {
		if _, err := path.Match(p, ""); err != nil && strings.HasSuffix(f.Op, "~") {
			return f, domain.Errorf(domain.EInvalid, "name filter %q: %q is not a glob: %v", given, p, err)
		}
	}
	return f, nil
}

// String is f as the filter writes it: ~*.txt,*.dat.
func (f NameFilter) String() string { return f.Op + strings.Join(f.Patterns, ",") }

// Match reports whether name passes f.
func (f NameFilter) Match(name string) bool {
	glob := strings.HasSuffix(f.Op, "~")
	any := slices.ContainsFunc(f.Patterns, func(p string) bool {
		if glob {
			ok, _ := path.Match(p, name)
			return ok
		}
		return p == name
	})
	return any != strings.HasPrefix(f.Op, "!")
}

// MarkerQuery selects a page of GET /task/{id}/successful_transfers,
// failed_transfers or skipped_errors:
// marker (0: from the start; else a NextMarker) and limit.
type MarkerQuery struct {
	Marker int64
	Limit  int
}

// Values encodes q.
func (q MarkerQuery) Values() url.Values {
	v := Page{Limit: q.Limit}.Values()
	if q.Marker != 0 {
		v.Set("marker", strconv.FormatInt(q.Marker, 10))
	}
	return v
}

// ParseMarkerQuery reads a MarkerQuery.
func ParseMarkerQuery(v url.Values) (MarkerQuery, error) {
	var q MarkerQuery
	if s := v.Get("marker"); s != "" {
		m, err := strconv.ParseInt(s, 10, 64)
		if err != nil || m < 0 {
			return q, domain.Errorf(domain.EInvalid, "marker=%q: want a marker from next_marker", s)
		}
		q.Marker = m
	}
	var err error
	q.Limit, err = nonNegative(v, "limit")
	return q, err
}
