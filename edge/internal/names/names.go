// Package names validates and normalises the names the edge publishes:
// DNS labels (subdomains, TCP aliases) and host names (custom domains). The
// API and the SSH server both use it, so what one accepts the other routes.
package names

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Normalize lower-cases a host name and drops a trailing dot and any port.
func Normalize(host string) string {
	h := strings.ToLower(strings.TrimSpace(host))
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		if _, err := strconv.Atoi(h[i+1:]); err == nil {
			h = h[:i]
		}
	}
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	return strings.TrimSuffix(h, ".")
}

// CheckLabel validates one DNS label: 1-63 of [a-z0-9-], no hyphen at
// either end. Upper case is refused rather than folded so that what the user
// reserved is exactly what is stored.
func CheckLabel(l string) error {
	if l == "" {
		return fmt.Errorf("empty label")
	}
	if len(l) > 63 {
		return fmt.Errorf("label %q is longer than 63 characters", l)
	}
	for i, c := range l {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
		if !ok {
			return fmt.Errorf("label %q has %q at %d: only a-z, 0-9 and '-' are allowed", l, c, i)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	return nil
}

// CheckDomain validates a full host name of at least two labels.
func CheckDomain(d string) error {
	if len(d) > 253 {
		return fmt.Errorf("domain %q is longer than 253 characters", d)
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return fmt.Errorf("domain %q needs at least two labels", d)
	}
	for _, l := range labels {
		if err := CheckLabel(l); err != nil {
			return fmt.Errorf("domain %q: %w", d, err)
		}
	}
	return nil
}

// SubdomainOf returns the single label l when host is l.base.
func SubdomainOf(host, base string) (string, bool) {
	l, ok := strings.CutSuffix(host, "."+base)
	if !ok || l == "" || strings.Contains(l, ".") {
		return "", false
	}
	return l, true
}

// CheckAlias validates a TCP endpoint alias: a DNS label that is not all
// digits, since an all-digit alias would be confused with a port number.
func CheckAlias(a string) error {
	if err := CheckLabel(a); err != nil {
		return fmt.Errorf("alias: %w", err)
	}
	if _, err := strconv.Atoi(a); err == nil {
		return fmt.Errorf("alias %q is all digits: it would read as a port number", a)
	}
	return nil
}

// Wildcards: a host "*.parent" stands for every name under parent, one or
// more labels deep, as a Gateway API listener hostname does ("*.example.com"
// covers "a.example.com" and "a.b.example.com", not "example.com"). A name
// is served by a wildcard only when nobody holds the name itself; the
// callers decide that (the edge's host lookup, its certificates).

// WildcardParent returns parent when host is "*.parent".
func WildcardParent(host string) (string, bool) {
	return strings.CutPrefix(host, "*.")
}

// CheckWildcard validates "*.parent": parent must itself be a valid
// domain (CheckDomain), so no wildcard covers a top-level domain.
func CheckWildcard(host string) error {
	parent, ok := WildcardParent(host)
	if !ok {
		return fmt.Errorf("%q is not a wildcard (*.parent)", host)
	}
	if err := CheckDomain(parent); err != nil {
		return fmt.Errorf("wildcard %q: %w", host, err)
	}
	return nil
}

// CheckHost validates an exact host (CheckDomain) or a wildcard
// (CheckWildcard).
func CheckHost(host string) error {
	if strings.HasPrefix(host, "*.") {
		return CheckWildcard(host)
	}
	return CheckDomain(host)
}

// Covering calls fn with each wildcard that covers host, the most specific
// first, until fn returns false: for "a.b.example.com", "*.b.example.com"
// then "*.example.com"; for the wildcard "*.b.example.com", "*.example.com".
// A wildcard's parent has at least two labels; an IP address has no
// wildcard.
func Covering(host string, fn func(wildcard string) bool) {
	if _, err := netip.ParseAddr(host); err == nil {
		return
	}
	rest := strings.TrimPrefix(host, "*.")
	for {
		_, parent, ok := strings.Cut(rest, ".")
		if !ok || !strings.Contains(parent, ".") {
			return
		}
		if !fn("*." + parent) {
			return
		}
		rest = parent
	}
}
