package server

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxGatewayAddresses bounds --gateway-addresses: each is a listener.
const maxGatewayAddresses = 1024

// ParseAddresses reads a list of addresses, comma-separated, each one
// address or a first-last range of one family ("192.0.2.10-192.0.2.20").
// Empty gives none.
func ParseAddresses(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		first, last, isRange := strings.Cut(part, "-")
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a first-last range", part)
		}
		b := a
		if isRange {
			if b, err = netip.ParseAddr(strings.TrimSpace(last)); err != nil || a.Is4() != b.Is4() || b.Less(a) {
				return nil, fmt.Errorf("%q is not a range: want first-last of one family, first not above last", part)
			}
		}
		for x := a; ; x = x.Next() {
			if !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
			if len(out) > maxGatewayAddresses {
				return nil, fmt.Errorf("more than %d addresses", maxGatewayAddresses)
			}
			if x == b {
				break
			}
		}
	}
	return out, nil
}
