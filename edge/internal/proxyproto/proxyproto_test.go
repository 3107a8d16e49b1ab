package proxyproto

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestV1(t *testing.T) {
	cases := []struct {
		src, dst netip.AddrPort
		want     string
	}{
		{ap("127.0.0.1:5555"), ap("127.0.0.2:443"), "PROXY TCP4 127.0.0.1 127.0.0.2 5555 443\r\n"},
		{ap("[::1]:1"), ap("[2001:db8::1]:2"), "PROXY TCP6 ::1 2001:db8::1 1 2\r\n"},
		{ap("[::ffff:127.0.0.1]:7"), ap("127.0.0.1:8"), "PROXY TCP4 127.0.0.1 127.0.0.1 7 8\r\n"},
		{ap("127.0.0.1:7"), ap("[::1]:8"), "PROXY TCP6 ::ffff:127.0.0.1 ::1 7 8\r\n"},
		{netip.AddrPort{}, ap("127.0.0.1:8"), "PROXY UNKNOWN\r\n"},
	}
	for _, c := range cases {
		if got := string(V1(c.src, c.dst)); got != c.want {
			t.Errorf("V1(%v,%v) = %q, want %q", c.src, c.dst, got, c.want)
		}
	}
}

func TestV2(t *testing.T) {
	sig := "0d0a0d0a000d0a515549540a"
	cases := []struct {
		name     string
		src, dst netip.AddrPort
		want     string
	}{
		{"ipv4", ap("127.0.0.1:5555"), ap("127.0.0.2:443"),
			sig + "21" + "11" + "000c" + "7f000001" + "7f000002" + "15b3" + "01bb"},
		{"ipv6", ap("[::1]:1"), ap("[::2]:2"),
			sig + "21" + "21" + "0024" + "00000000000000000000000000000001" + "00000000000000000000000000000002" + "0001" + "0002"},
		{"local", netip.AddrPort{}, netip.AddrPort{}, sig + "20" + "00" + "0000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, _ := hex.DecodeString(c.want)
			if got := V2(c.src, c.dst); !bytes.Equal(got, want) {
				t.Fatalf("V2 = %x, want %x", got, want)
			}
		})
	}
}

func TestHeaderVersion(t *testing.T) {
	if _, err := Header("v3", ap("127.0.0.1:1"), ap("127.0.0.1:2")); err == nil {
		t.Fatal("unknown version accepted")
	}
	h, err := Header("v1", ap("127.0.0.1:1"), ap("127.0.0.1:2"))
	if err != nil || !bytes.HasPrefix(h, []byte("PROXY TCP4")) {
		t.Fatalf("Header v1 = %q, %v", h, err)
	}
}
