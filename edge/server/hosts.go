package server

import (
	"context"
	"fmt"

	"code.tuna.am/tuna/k8s-operator/edge/names"
)

// knownHost decides 502 (ours, not connected) against 404 (not ours) for a
// host without a live route. It runs only on that miss path, so scanning
// the tunnel keys (a few per tunnel) costs nothing on routed requests.
func (e *Edge) knownHost(host string) bool {
	if _, err := e.st.GetDomain(host); err == nil {
		return true
	}
	tks, err := e.st.ListTunnelKeys()
	if err != nil {
		return false
	}
	for _, k := range tks {
		if k.Protocol == "http" && k.Address == host {
			return true
		}
	}
	return false
}

// acmeHostPolicy lets ACME issue certificates only for names the edge
// serves: single-label subdomains and verified custom domains.
func (e *Edge) acmeHostPolicy(_ context.Context, host string) error {
	host = names.Normalize(host)
	if _, ok := names.SubdomainOf(host, e.cfg.BaseDomain); ok || host == e.cfg.BaseDomain {
		return nil
	}
	if d, err := e.st.GetDomain(host); err == nil && (!d.Custom || d.Verified) {
		return nil
	}
	return fmt.Errorf("tuna-edge does not serve %s", host)
}
