// Package acl evaluates the CIDR allow/deny lists a bind carries. Deny wins
// over allow; an empty allow list admits everyone not denied.
package acl

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// List is a parsed allow/deny pair; the zero value admits everyone.
type List struct {
	allow []netip.Prefix
	deny  []netip.Prefix
}

// Parse parses CIDRs; a bare address counts as a single-host prefix.
func Parse(allow, deny []string) (*List, error) {
	a, err := parsePrefixes(allow)
	if err != nil {
		return nil, fmt.Errorf("allow_cidrs: %w", err)
	}
	d, err := parsePrefixes(deny)
	if err != nil {
		return nil, fmt.Errorf("deny_cidrs: %w", err)
	}
	return &List{allow: a, deny: d}, nil
}

func parsePrefixes(in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, s := range in {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", s)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked())
	}
	return out, nil
}

// Allowed reports whether a client address may connect.
func (l *List) Allowed(a netip.Addr) bool {
	if l == nil {
		return true
	}
	a = a.Unmap()
	for _, p := range l.deny {
		if p.Contains(a) {
			return false
		}
	}
	if len(l.allow) == 0 {
		return true
	}
	for _, p := range l.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AllowedAddr is Allowed for a net.Addr or "host:port" string; anything that
// cannot be parsed is refused, since an ACL that fails open is no ACL.
func (l *List) AllowedAddr(addr string) bool {
	if l == nil || (len(l.allow) == 0 && len(l.deny) == 0) {
		return true
	}
	ap, err := netip.ParseAddrPort(addr)
	if err == nil {
		return l.Allowed(ap.Addr())
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return l.Allowed(a)
}
