package edgeapi

import (
	"context"
	"crypto/sha256"
	"sync"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
)

// Certificates is what the Gateway controller calls to hand an HTTPS
// listener's certificate to the edge: a host's own certificate, which only
// the owner that holds the host may set or remove (the edge refuses
// another with address_owned, naming the holder).
type Certificates interface {
	PutCertificate(ctx context.Context, host, owner string, in apiwire.PutCertificate) (*apiwire.Certificate, error)
	DeleteCertificate(ctx context.Context, host, owner string) error
}

var _ Certificates = (*client.Client)(nil)

// HostCertificates sets hosts' own certificates on the edge and remembers
// what it set, so that a reconcile that changes nothing calls nothing, and
// a host whose last HTTPS listener went is known to need a removal. What
// it remembers is this process's: after a restart every certificate is
// set once again (the call is idempotent).
type HostCertificates struct {
	API Certificates

	mu  sync.Mutex
	set map[string]hostCert // host -> what this process set
}

type hostCert struct {
	owner string
	sum   [sha256.Size]byte
}

func sumOf(chainPEM, keyPEM []byte) [sha256.Size]byte {
	b := make([]byte, 0, len(chainPEM)+1+len(keyPEM))
	b = append(append(append(b, chainPEM...), 0), keyPEM...)
	return sha256.Sum256(b)
}

// Holds reports whether this process set exactly this certificate for
// host, acting for owner.
func (h *HostCertificates) Holds(host, owner string, chainPEM, keyPEM []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.set[host]
	return ok && c.owner == owner && c.sum == sumOf(chainPEM, keyPEM)
}

// Owner is the owner this process set host's certificate for ("" none).
func (h *HostCertificates) Owner(host string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.set[host].owner
}

// Put sets host's certificate, acting for owner, unless this process
// already set the same one. The edge refuses an owner that does not hold
// the host (address_owned), a host nobody holds yet (not_found: its key
// is not issued yet) and a certificate that is not for the host or not
// valid now (invalid_request).
func (h *HostCertificates) Put(ctx context.Context, host, owner string, chainPEM, keyPEM []byte) error {
	if h.Holds(host, owner, chainPEM, keyPEM) {
		return nil
	}
	if _, err := h.API.PutCertificate(ctx, host, owner, apiwire.PutCertificate{ChainPEM: string(chainPEM), KeyPEM: string(keyPEM)}); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.set == nil {
		h.set = map[string]hostCert{}
	}
	h.set[host] = hostCert{owner: owner, sum: sumOf(chainPEM, keyPEM)}
	return nil
}

// Remove removes the certificate this process set for host (none: no
// call). A certificate already gone, or a host its owner no longer holds
// (whose certificate the edge no longer serves, and which its new holder
// may not remove for it), counts as removed.
func (h *HostCertificates) Remove(ctx context.Context, host string) error {
	owner := h.Owner(host)
	if owner == "" {
		return nil
	}
	err := h.API.DeleteCertificate(ctx, host, owner)
	if err != nil && !apiwire.IsNotFound(err) && apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.set, host)
	return nil
}

// Hosts are the hosts this process set a certificate for.
func (h *HostCertificates) Hosts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.set))
	for host := range h.set {
		out = append(out, host)
	}
	return out
}
