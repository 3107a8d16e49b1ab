package server

import (
	"context"
	"fmt"

	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
)

// knownHost decides 502 (ours, not connected) against 404 (not ours) for a
// host without a live route. Anyone can send requests for random hosts, so
// it must cost the same however many keys the store holds: the store
// answers from its in-memory host index.
func (e *Edge) knownHost(host string) bool { return e.st.Host(host).Known() }

// acmeHostPolicy lets ACME order certificates only for names the edge
// serves: reserved subdomains, verified custom domains, subdomains named by
// a tunnel key, and hosts a live session has bound. Anything else is refused
// before any request reaches the CA, so a client sending random SNI names
// cannot make the edge spend the base domain's rate limit at the CA.
func (e *Edge) acmeHostPolicy(_ context.Context, host string) error {
	host = names.Normalize(host)
	h := e.st.Host(host)
	if h.Reserved && h.Custom && !h.Verified {
		return fmt.Errorf("tuna-edge: custom domain %s is not verified yet; no certificate is requested before it is", host)
	}
	if h.Reserved {
		return nil
	}
	// A key may still name a custom domain that was released: only
	// subdomains of the base domain count on a key's word alone.
	if _, sub := names.SubdomainOf(host, e.cfg.BaseDomain); sub && h.Keys > 0 {
		return nil
	}
	// sshd binds only subdomains and verified custom domains.
	if e.reg.Lookup(host) != nil {
		return nil
	}
	return fmt.Errorf("tuna-edge: no reservation, tunnel key or live tunnel serves %s", host)
}
