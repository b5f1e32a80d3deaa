package gridftp

import (
	"reflect"
	"testing"
)

func TestLayoutSplit(t *testing.T) {
	all := []Range{{0, 10}}
	tests := []struct {
		name string
		l    Layout
		segs []Range
		i, n int
		want []Range
	}{
		{"one stripe", Layout{BlockSize: 2}, all, 0, 1, all},
		{"blocked 0 of 2", Layout{BlockSize: 2}, all, 0, 2, []Range{{0, 2}, {4, 6}, {8, 10}}},
		{"blocked 1 of 2", Layout{BlockSize: 2}, all, 1, 2, []Range{{2, 4}, {6, 8}}},
		{"blocked of 3 joins nothing", Layout{BlockSize: 3}, all, 2, 3, []Range{{6, 9}}},
		{"blocked cuts ranges", Layout{BlockSize: 4}, []Range{{1, 3}, {5, 9}}, 1, 2, []Range{{5, 8}}},
		{"blocked counts from the file's start", Layout{BlockSize: 4}, []Range{{6, 10}}, 0, 2, []Range{{8, 10}}},
		{"blocked, one stripe of 1 joins", Layout{BlockSize: 2}, []Range{{0, 3}, {3, 5}}, 0, 1, []Range{{0, 3}, {3, 5}}},
		{"partitioned 0 of 3", Layout{Partitioned: true}, all, 0, 3, []Range{{0, 4}}},
		{"partitioned 2 of 3", Layout{Partitioned: true}, all, 2, 3, []Range{{8, 10}}},
		{"partitioned, more parts than bytes", Layout{Partitioned: true}, []Range{{0, 2}}, 3, 4, nil},
		{"partitioned with a gap", Layout{Partitioned: true}, []Range{{0, 3}, {7, 10}}, 1, 2, []Range{{7, 10}}},
	}
	for _, tt := range tests {
		if got := tt.l.Split(tt.segs, 0, 10, tt.i, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPlanStripes(t *testing.T) {
	bl := Layout{BlockSize: 2}
	all := []Range{{0, 8}}
	tests := []struct {
		name         string
		l            Layout
		segs         []Range
		i, n, m, p   int
		segs0, segs1 []Range
		eofs         []int
	}{
		{"pairs: 0 sends to 0 and counts both", bl, all, 0, 2, 2, 2, []Range{{0, 2}, {4, 6}}, nil, []int{4, 4}},
		{"pairs: 1 sends to 1", bl, all, 1, 2, 2, 2, nil, []Range{{2, 4}, {6, 8}}, []int{0, 0}},
		{"two to one: 0 counts both", bl, all, 0, 2, 1, 3, []Range{{0, 2}, {4, 6}}, nil, []int{6}},
		{"two to one: 1 sends its blocks", bl, all, 1, 2, 1, 3, []Range{{2, 4}, {6, 8}}, nil, []int{0}},
		{"nothing to send: 0 ends every stripe", bl, nil, 0, 2, 2, 1, nil, nil, []int{2, 2}},
		{"nothing to send: 1 sends EODs only", bl, nil, 1, 2, 2, 1, nil, nil, []int{0, 0}},
		{"one block: 1 has no data", bl, []Range{{0, 2}}, 1, 2, 2, 1, nil, nil, []int{0, 0}},
		{"one block: 0 sends it", bl, []Range{{0, 2}}, 0, 2, 2, 1, []Range{{0, 2}}, nil, []int{2, 2}},
		{"partitioned 2 to 2", Layout{Partitioned: true}, all, 1, 2, 2, 1, nil, []Range{{4, 8}}, []int{0, 0}},
		{"one sender to 2 stripes", bl, all, 0, 1, 2, 2, []Range{{0, 2}, {4, 6}}, []Range{{2, 4}, {6, 8}}, []int{2, 2}},
	}
	for _, tt := range tests {
		p := PlanStripes(tt.l, tt.segs, 0, 8, tt.i, tt.n, tt.m, tt.p)
		if !reflect.DeepEqual(p.EOF, tt.eofs) ||
			!reflect.DeepEqual(p.Segs[0], tt.segs0) || (tt.m > 1 && !reflect.DeepEqual(p.Segs[1], tt.segs1)) {
			t.Errorf("%s: got %+v", tt.name, p)
		}
	}
}

func TestLayoutOptions(t *testing.T) {
	tests := []struct {
		in   string
		want Layout
		has  bool
	}{
		{"StripeLayout=Blocked;BlockSize=262144;Parallelism=2,2,2;", Layout{BlockSize: 262144}, true},
		{"stripelayout=partitioned;", Layout{Partitioned: true}, true},
		{"Parallelism=4;", Layout{}, false},
	}
	for _, tt := range tests {
		o, err := ParseRetrOptions(tt.in)
		if err != nil || o.Layout != tt.want || o.HasLayout != tt.has {
			t.Errorf("%q: got %+v, %v", tt.in, o, err)
		}
		if tt.has {
			back, err := ParseRetrOptions(o.Layout.String())
			if err != nil || back.Layout.Partitioned != tt.want.Partitioned {
				t.Errorf("%q: String %q reads back as %+v, %v", tt.in, o.Layout.String(), back, err)
			}
		}
	}
	if _, err := ParseRetrOptions("StripeLayout=Diagonal;"); err == nil {
		t.Error("an unknown layout was taken")
	}
}

func TestLayoutString(t *testing.T) {
	for _, tt := range []struct {
		l    Layout
		want string
	}{
		{Layout{BlockSize: 262144}, "StripeLayout=Blocked;BlockSize=262144;"},
		{Layout{}, "StripeLayout=Blocked;BlockSize=1048576;"},
		{Layout{Partitioned: true}, "StripeLayout=Partitioned;"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.l, got, tt.want)
		}
	}
}
