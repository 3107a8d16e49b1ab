// Package dnsverify proves that a custom domain points at the edge: its
// CNAME must name the edge's target and a TXT record _tuna-challenge.<domain>
// must carry the domain's random token. Queries go to one configured
// resolver, so operators (and tests) control exactly which server is asked.
package dnsverify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// ChallengePrefix is the label of the TXT record that carries the token.
const ChallengePrefix = "_tuna-challenge."

// System selects the operating system's resolver instead of an address.
const System = "system"

// ErrDisabled is returned when the edge has no resolver configured.
var ErrDisabled = errors.New("DNS verification is disabled on this edge (no DNS resolver configured)")

// Verifier checks custom domains.
type Verifier struct {
	resolver *net.Resolver
	timeout  time.Duration
}

// New returns a verifier asking addr (host:port), the OS resolver when addr
// is System, or a disabled verifier when addr is empty.
func New(addr string) *Verifier {
	v := &Verifier{timeout: 5 * time.Second}
	switch addr {
	case "":
		return v
	case System:
		v.resolver = net.DefaultResolver
		return v
	}
	v.resolver = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			// Whatever server the system config names, ask ours.
			return d.DialContext(ctx, network, addr)
		},
	}
	return v
}

// Check verifies domain: its CNAME must be target and the challenge TXT
// record must contain token. The error says which record is wrong.
func (v *Verifier) Check(ctx context.Context, domain, target, token string) error {
	if v == nil || v.resolver == nil {
		return ErrDisabled
	}
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	var problems []string
	cname, err := v.resolver.LookupCNAME(ctx, domain)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("CNAME %s: lookup failed: %v", domain, err))
	case !sameName(cname, target):
		problems = append(problems, fmt.Sprintf("CNAME %s points to %s, want %s", domain, strings.TrimSuffix(cname, "."), target))
	}
	txts, err := v.resolver.LookupTXT(ctx, ChallengePrefix+domain)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("TXT %s%s: lookup failed: %v", ChallengePrefix, domain, err))
	case !slices.Contains(txts, token):
		problems = append(problems, fmt.Sprintf("TXT %s%s does not contain the challenge token", ChallengePrefix, domain))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func sameName(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}
