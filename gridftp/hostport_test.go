package gridftp_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"ferry/gridftp"
)

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for an error
	}{
		{"127,0,0,1,222,199", "127.0.0.1:57031"},
		{"192,168,1,2,0,21", "192.168.1.2:21"},
		{" 10,0,0,1,4,1 ", "10.0.0.1:1025"},
		{"10, 0, 0, 1, 4, 1", "10.0.0.1:1025"},
		{"255,255,255,255,255,255", "255.255.255.255:65535"},
		{"127,0,0,1,0,0", ""},
		{"127,0,0,1,256,1", ""},
		{"127,0,0,1,1", ""},
		{"127,0,0,1,1,1,1", ""},
		{"127,0,0,-1,1,1", ""},
		{"127,0,0,1,a,1", ""},
		{"127.0.0.1,1,1", ""},
		{"", ""},
		{",,,,,", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := gridftp.ParseHostPort(tt.in)
			if tt.want == "" {
				if !errors.Is(err, gridftp.ErrBadAddress) {
					t.Fatalf("ParseHostPort(%q) = %v, %v; want ErrBadAddress", tt.in, got, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("ParseHostPort(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFormatHostPort(t *testing.T) {
	for _, s := range []string{"127.0.0.1:57031", "10.1.2.3:1", "1.2.3.4:65535"} {
		ap := netip.MustParseAddrPort(s)
		f := gridftp.FormatHostPort(ap)
		back, err := gridftp.ParseHostPort(f)
		if err != nil || back != ap {
			t.Errorf("ParseHostPort(FormatHostPort(%v) = %q) = %v, %v", ap, f, back, err)
		}
	}
	if got := gridftp.FormatHostPort(netip.MustParseAddrPort("127.0.0.1:57031")); got != "127,0,0,1,222,199" {
		t.Errorf("FormatHostPort = %q", got)
	}
	if got := gridftp.FormatHostPort(netip.MustParseAddrPort("[::ffff:10.0.0.1]:1025")); got != "10,0,0,1,4,1" {
		t.Errorf("FormatHostPort of a mapped address = %q", got)
	}
}

func TestParseEPRT(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"|1|132.235.1.2|6275|", "132.235.1.2:6275"},
		{"|2|1080::8:800:200C:417A|5282|", "[1080::8:800:200c:417a]:5282"},
		{"|2|::1|2811|", "[::1]:2811"},
		{" |1|127.0.0.1|2811| ", "127.0.0.1:2811"},
		{"!1!127.0.0.1!2811!", "127.0.0.1:2811"},
		{"|2|::ffff:127.0.0.1|2811|", "[::ffff:127.0.0.1]:2811"},
		{"|1|::1|2811|", ""},
		{"|2|127.0.0.1|2811|", ""},
		{"|3|127.0.0.1|2811|", ""},
		{"||127.0.0.1|2811|", ""},
		{"|1|127.0.0.1|0|", ""},
		{"|1|127.0.0.1|65536|", ""},
		{"|1|127.0.0.1|2811", ""},
		{"|1|127.0.0.1|2811|x|", ""},
		{"|1|localhost|2811|", ""},
		{"|1||2811|", ""},
		{"|||", ""},
		{"", ""},
		{"1,2,3,4,5,6", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := gridftp.ParseEPRT(tt.in)
			if tt.want == "" {
				if !errors.Is(err, gridftp.ErrBadAddress) {
					t.Fatalf("ParseEPRT(%q) = %v, %v; want ErrBadAddress", tt.in, got, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("ParseEPRT(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParsePassive(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"Entering Passive Mode (127,0,0,1,222,199)", "127.0.0.1:57031"},
		{"Entering Passive Mode (127,0,0,1,222,199).", "127.0.0.1:57031"},
		{"(10,0,0,1,4,1)", "10.0.0.1:1025"},
		{"127,0,0,1,4,1", "127.0.0.1:1025"},
		{"Entering Passive Mode (127,0,0,1,0,0)", ""},
		{"Entering Passive Mode (127,0,0,1)", ""},
		{"Entering Passive Mode", ""},
		{")127,0,0,1,4,1(", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := gridftp.ParsePassive(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParsePassive(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("ParsePassive(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseExtPassive(t *testing.T) {
	tests := []struct {
		in   string
		want uint16
	}{
		{"Entering Extended Passive Mode (|||52851|)", 52851},
		{"Entering Extended Passive Mode (|||52851|).", 52851},
		{"(!!!1!)", 1},
		{"(|||65535|)", 65535},
		{"(|||0|)", 0},
		{"(|||65536|)", 0},
		{"(|||x|)", 0},
		{"(||52851|)", 0},
		{"(|||52851||)", 0},
		{"Entering Extended Passive Mode", 0},
		{"(|)", 0},
		{")(", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := gridftp.ParseExtPassive(tt.in)
			if tt.want == 0 {
				if !errors.Is(err, gridftp.ErrBadAddress) {
					t.Fatalf("ParseExtPassive(%q) = %d, %v; want ErrBadAddress", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseExtPassive(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseHostPorts(t *testing.T) {
	got, err := gridftp.ParseHostPorts("127,0,0,1,1,1 127,0,0,1,1,2  127,0,0,2,1,3")
	want := []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:257"),
		netip.MustParseAddrPort("127.0.0.1:258"),
		netip.MustParseAddrPort("127.0.0.2:259"),
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseHostPorts = %v, %v", got, err)
	}
	// The middle lines of a SPAS reply, as a client would join them.
	spas := gridftp.Reply{Code: 229, Lines: []string{"Entering Striped Passive Mode.", " 127,0,0,1,163,187", " 127,0,0,1,163,188", "End"}}
	got, err = gridftp.ParseHostPorts(spas.Lines[1] + "\n" + spas.Lines[2])
	if err != nil || len(got) != 2 || got[1].Port() != 163<<8|188 {
		t.Fatalf("SPAS lines: %v, %v", got, err)
	}
	// EPRT's form, as GCT takes it too: the only one for IPv6.
	got, err = gridftp.ParseHostPorts("|1|127.0.0.1|1025| 127,0,0,1,1,2 |2|::1|2000|")
	if err != nil || len(got) != 3 || got[0].String() != "127.0.0.1:1025" || got[2].String() != "[::1]:2000" {
		t.Fatalf("EPRT-style entries: %v, %v", got, err)
	}
	for _, bad := range []string{"", "   ", "127,0,0,1,1,1 x", "127,0,0,1,1", "|2|nohost|1|", "|1|127.0.0.1|"} {
		if _, err := gridftp.ParseHostPorts(bad); !errors.Is(err, gridftp.ErrBadAddress) {
			t.Errorf("ParseHostPorts(%q): %v, want ErrBadAddress", bad, err)
		}
	}
	var many []byte
	for range gridftp.MaxStreams + 1 {
		many = append(many, "127,0,0,1,1,1 "...)
	}
	if _, err := gridftp.ParseHostPorts(string(many)); !errors.Is(err, gridftp.ErrBadAddress) {
		t.Errorf("more than MaxStreams addresses: %v", err)
	}
}
