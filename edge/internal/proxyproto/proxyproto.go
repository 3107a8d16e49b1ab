// Package proxyproto encodes PROXY protocol headers (HAProxy's spec, v1 text
// and v2 binary) so a TCP backend behind the tunnel learns the public
// client's address. Only the encoder lives here: the edge never reads them.
package proxyproto

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// v2Signature starts every v2 header.
var v2Signature = []byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

// Header returns the header of version "v1" or "v2" for a connection from
// src to dst (dst is the edge's public listener).
func Header(version string, src, dst netip.AddrPort) ([]byte, error) {
	switch version {
	case "v1":
		return V1(src, dst), nil
	case "v2":
		return V2(src, dst), nil
	}
	return nil, fmt.Errorf("unknown PROXY protocol version %q (want v1 or v2)", version)
}

// V1 is the text form: "PROXY TCP4 src dst sport dport\r\n". Mixed families
// (one side v4, one v6) are written as TCP6 with mapped addresses, and a
// missing address as "PROXY UNKNOWN\r\n", both as the spec asks.
func V1(src, dst netip.AddrPort) []byte {
	if !src.IsValid() || !dst.IsValid() {
		return []byte("PROXY UNKNOWN\r\n")
	}
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	fam := "TCP4"
	if !s.Is4() || !d.Is4() {
		fam = "TCP6"
		s, d = as16(s), as16(d)
	}
	return fmt.Appendf(nil, "PROXY %s %s %s %d %d\r\n", fam, s, d, src.Port(), dst.Port())
}

// V2 is the binary form with command PROXY over TCP (no TLVs).
func V2(src, dst netip.AddrPort) []byte {
	out := append([]byte(nil), v2Signature...)
	if !src.IsValid() || !dst.IsValid() {
		// LOCAL command, family UNSPEC: the receiver uses the real
		// connection's addresses.
		return append(out, 0x20, 0x00, 0, 0)
	}
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	if s.Is4() && d.Is4() {
		out = append(out, 0x21, 0x11, 0, 12) // PROXY, TCP over IPv4, 12 bytes
		out = append(out, s.AsSlice()...)
		out = append(out, d.AsSlice()...)
	} else {
		out = append(out, 0x21, 0x21, 0, 36) // PROXY, TCP over IPv6, 36 bytes
		out = append(out, as16(s).AsSlice()...)
		out = append(out, as16(d).AsSlice()...)
	}
	out = binary.BigEndian.AppendUint16(out, src.Port())
	return binary.BigEndian.AppendUint16(out, dst.Port())
}

func as16(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}
