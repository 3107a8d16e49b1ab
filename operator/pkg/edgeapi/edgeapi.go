// Package edgeapi is the operator's view of the tuna-edge control API: a
// small interface (so reconcilers can be unit-tested against a fake) and the
// one mapping of API errors to requeue rules and conditions (failure.go).
package edgeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
)

// TunnelKeys is what the controller needs to manage per-tunnel keys.
type TunnelKeys interface {
	Edge(ctx context.Context) (*apiwire.EdgeInfo, error)
	CreateTunnelKey(ctx context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error)
	ListTunnelKeys(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error)
	RevokeTunnelKey(ctx context.Context, id string) error
	// RenewTunnelKey extends a key's expiry by the edge's TTL.
	RenewTunnelKey(ctx context.Context, id string) (*apiwire.TunnelKey, error)
}

// Reservations is what the Domain and TCPEndpoint reconcilers need. Every
// change and release names the owner it acts for (Owner), so the edge
// refuses one of an address another owner holds.
type Reservations interface {
	CreateDomain(ctx context.Context, in apiwire.CreateDomain) (*apiwire.Domain, error)
	GetDomain(ctx context.Context, name string) (*apiwire.Domain, error)
	VerifyDomain(ctx context.Context, name, owner string) (*apiwire.Domain, error)
	DeleteDomain(ctx context.Context, name, owner string) error
	ShareDomain(ctx context.Context, name, owner string, sharedWith []string) (*apiwire.Domain, error)
	// SetDomainAccessPolicy puts the owner's access policy on a domain
	// ("" takes it off).
	SetDomainAccessPolicy(ctx context.Context, name, owner, policy string) (*apiwire.Domain, error)
	CreateTCPEndpoint(ctx context.Context, in apiwire.CreateTCPEndpoint) (*apiwire.TCPEndpoint, error)
	ShareTCPEndpoint(ctx context.Context, alias, owner string, sharedWith []string) (*apiwire.TCPEndpoint, error)
	GetTCPEndpoint(ctx context.Context, alias string) (*apiwire.TCPEndpoint, error)
	DeleteTCPEndpoint(ctx context.Context, alias, owner string) error
}

// API is the whole surface the operator uses.
type API interface {
	TunnelKeys
	Reservations
	WhoAmI(ctx context.Context) (*apiwire.WhoAmI, error)
}

var _ API = (*client.Client)(nil)

// Labels the operator puts on every tunnel key it issues, so it can find the
// keys of one resource and never touch another cluster's keys.
const (
	LabelCluster   = "k8s.tuna.am/cluster"
	LabelKind      = "k8s.tuna.am/kind"
	LabelNamespace = "k8s.tuna.am/namespace"
	LabelName      = "k8s.tuna.am/name"
	LabelUID       = "k8s.tuna.am/uid"
	// LabelHost names the Ingress host a key serves (kind Ingress): one key
	// per host, shared by every Ingress with a rule for that host, so such
	// keys carry no namespace, name or UID.
	LabelHost = "k8s.tuna.am/host"
)

// Code is the API error code of err, or "".
func Code(err error) string { return apiwire.CodeOf(err) }

// Owner is the identity a namespace of this cluster has on the edge: every
// reservation and key the operator makes for the namespace carries it, so
// another namespace, or another cluster on the same account, cannot use
// its addresses.
func Owner(clusterID, namespace string) string { return clusterID + "/" + namespace }

// Owners maps namespace names (spec.sharedWith) to edge owners.
func Owners(clusterID string, namespaces []string) []string {
	out := make([]string, 0, len(namespaces))
	for _, ns := range namespaces {
		out = append(out, Owner(clusterID, ns))
	}
	return out
}

// Owned turns the edge's address_owned refusal into a condition message
// for a resource of namespace, naming the owner and what works; ok is
// false for any other error.
func Owned(err error, clusterID, namespace string) (msg string, ok bool) {
	var ae *apiwire.APIError
	if !errors.As(err, &ae) || ae.Code != apiwire.CodeAddressOwned {
		return "", false
	}
	return OwnedMessage(ae.Address, ae.Owner, ae.Claim, clusterID, namespace), true
}

// OwnedMessage says that address belongs to owner (by a claim on a bare
// subdomain, or by a reservation) and what the user of namespace can do
// about it: only what works for that kind of owner.
func OwnedMessage(address, owner string, claim bool, clusterID, namespace string) string {
	if ns, ok := strings.CutPrefix(owner, clusterID+"/"); ok {
		if claim {
			return fmt.Sprintf("%s belongs to namespace %s, whose Tunnel or Ingress used this bare subdomain first: it is free once "+
				"that namespace's tunnels on it are gone; or namespace %s reserves it with a Domain that lists namespace %s in "+
				"spec.sharedWith; or choose another address", address, ns, ns, namespace)
		}
		return fmt.Sprintf("%s belongs to namespace %s: ask its owner to add namespace %s to spec.sharedWith of its Domain or "+
			"TCPEndpoint, or choose another address", address, ns, namespace)
	}
	if id, ok := strings.CutPrefix(owner, "key:"); ok {
		return fmt.Sprintf("%s is used by the tunnels of edge API key %s (Tunnels with their own key, spec.apiKeySecretRef, or "+
			"another SSH client): it is free once they stop and their claim is gone; or choose another address", address, id)
	}
	oldCluster, ns, _ := strings.Cut(owner, "/")
	msg := fmt.Sprintf("%s belongs to owner %s on the edge, not to this cluster (id %s): choose another address", address, owner, clusterID)
	if ns == namespace {
		// The same namespace of another cluster id: most likely this
		// cluster before a rebuild, whose addresses the edge's
		// administrator can hand over.
		msg += fmt.Sprintf("; if %s was this cluster's id before a rebuild, the edge's administrator hands its addresses over "+
			"with `tuna-edge owners transfer --from %s --to %s`, or install the operator with clusterID=%s",
			oldCluster, oldCluster, clusterID, oldCluster)
	}
	return msg
}
