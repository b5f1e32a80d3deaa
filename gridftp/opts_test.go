package gridftp_test

import (
	"testing"

	"ferry/gridftp"
)

func TestParseRetrOptions(t *testing.T) {
	tests := []struct {
		in   string
		want gridftp.RetrOptions
		ok   bool
	}{
		{"Parallelism=4,4,4;", gridftp.RetrOptions{Parallelism: 4}, true},
		{"Parallelism=1;", gridftp.RetrOptions{Parallelism: 1}, true},
		{"parallelism=8;", gridftp.RetrOptions{Parallelism: 8}, true},
		{" Parallelism=2,2,2; ", gridftp.RetrOptions{Parallelism: 2}, true},
		{"Parallelism=16,16,64;", gridftp.RetrOptions{Parallelism: 16, MaxParallelism: 64}, true},
		{"Parallelism=16,16,8;", gridftp.RetrOptions{Parallelism: 16}, true},
		{"Parallelism=4,4,x;", gridftp.RetrOptions{Parallelism: 4}, true},
		{"Parallelism=4,4,5000;", gridftp.RetrOptions{Parallelism: 4, MaxParallelism: 1024}, true},
		{"Markers=5;", gridftp.RetrOptions{Markers: 5}, true},
		{"StripeLayout=Blocked;BlockSize=1048576;", gridftp.RetrOptions{BlockSize: 1048576, Layout: gridftp.Layout{BlockSize: 1048576}, HasLayout: true}, true},
		{"StripeLayout=Partitioned;", gridftp.RetrOptions{Layout: gridftp.Layout{Partitioned: true}, HasLayout: true}, true},
		{"Parallelism=4,4,4;StripeLayout=Blocked;BlockSize=262144;Markers=1;",
			gridftp.RetrOptions{Parallelism: 4, Markers: 1, BlockSize: 262144, Layout: gridftp.Layout{BlockSize: 262144}, HasLayout: true}, true},
		{"Parallelism=1024;", gridftp.RetrOptions{Parallelism: 1024}, true},
		// GCT insists on the ';' after every item.
		{"Parallelism=4,4,4", gridftp.RetrOptions{}, false},
		{"Parallelism=4;Markers=5", gridftp.RetrOptions{}, false},
		{"", gridftp.RetrOptions{}, false},
		{";", gridftp.RetrOptions{}, false},
		{"Parallelism;", gridftp.RetrOptions{}, false},
		{"Parallelism=0;", gridftp.RetrOptions{}, false},
		{"Parallelism=-1;", gridftp.RetrOptions{}, false},
		{"Parallelism=1025;", gridftp.RetrOptions{}, false},
		{"Parallelism=x;", gridftp.RetrOptions{}, false},
		{"Markers=-1;", gridftp.RetrOptions{}, false},
		{"Markers=86401;", gridftp.RetrOptions{}, false},
		{"BlockSize=0;", gridftp.RetrOptions{}, false},
		{"BlockSize=67108865;", gridftp.RetrOptions{}, false},
		{"Bogus=1;", gridftp.RetrOptions{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := gridftp.ParseRetrOptions(tt.in)
			if tt.ok != (err == nil) {
				t.Fatalf("ParseRetrOptions(%q) error %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err == nil && got != tt.want {
				t.Fatalf("ParseRetrOptions(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}
