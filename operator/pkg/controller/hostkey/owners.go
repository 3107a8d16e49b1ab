package hostkey

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// ReasonAddressOwned is the warning event on an Ingress whose host belongs
// to another namespace that has not shared it.
const ReasonAddressOwned = "AddressOwned"

// labelNamespaces is a digest of the namespaces a host key serves: a key
// whose digest differs is replaced, which hands the agent a Secret with the
// new list through the usual key rotation.
const labelNamespaces = "k8s.tuna.am/namespaces"

// tenancy is who may publish a host: the namespaces whose Ingresses are
// served, the one the key is issued for, and why the others are refused.
type tenancy struct {
	owner   string   // namespace the key is issued for
	allowed []string // sorted
	refused map[string]string
}

// tenancy reads the host's reservation on the edge: a reservation owned by
// a namespace serves that namespace and those in its shared_with; an
// unowned one (made by hand) serves every namespace, as before owners
// existed.
func (r *Reconciler) tenancy(ctx context.Context, host string, namespaces []string) (tenancy, error) {
	var sharing apiwire.Sharing
	claimed := false
	d, err := r.Edge.GetDomain(ctx, host)
	switch {
	case err == nil:
		sharing = d.Sharing
	case !apiwire.IsNotFound(err):
		return tenancy{}, err
	default:
		claimed = r.firstClaim(ctx, host)
	}
	t := tenancy{refused: map[string]string{}}
	for _, ns := range namespaces { // oldest first: the first allowed one issues the key for an unowned host
		if slices.Contains(t.allowed, ns) || t.refused[ns] != "" {
			continue
		}
		o := edgeapi.Owner(r.ClusterID, ns)
		if sharing.Owner != "" && sharing.Owner != o && !slices.Contains(sharing.SharedWith, o) {
			t.refused[ns] = edgeapi.OwnedMessage(host, sharing.Owner, false, r.ClusterID, ns)
			continue
		}
		if claimed && t.owner != "" {
			// An unreserved host the first publisher claims is that
			// namespace's alone, as the edge holds it.
			t.refused[ns] = fmt.Sprintf("host %s is published first by namespace %s, which holds it: reserve it with a Domain that lists namespace %s in spec.sharedWith to share it", host, t.owner, ns)
			continue
		}
		t.allowed = append(t.allowed, ns)
		if t.owner == "" || o == sharing.Owner {
			t.owner = ns
		}
	}
	slices.Sort(t.allowed)
	return t, nil
}

// digest names the tenancy a key was issued for. "owner:" marks the key
// Secrets that name the owner namespace (keysecret.KeyOwner): a key of
// an older controller, whose Secret does not, is issued again once.
func (t tenancy) digest() string {
	sum := sha256.Sum256([]byte("owner:" + t.owner + "|" + strings.Join(t.allowed, ",")))
	return hex.EncodeToString(sum[:8])
}

// publishers are the namespaces that publish host, in the order their
// oldest Ingress or Gateway for it was created: that order decides who
// issues the key of a host made by hand without an owner.
func (r *Reconciler) publishers(ctx context.Context, host string, ings []*networkingv1.Ingress) ([]string, error) {
	objs := make([]client.Object, 0, len(ings))
	for _, ing := range ings {
		objs = append(objs, ing)
	}
	if r.gateways.Load() {
		gws, err := gateway.Source.ServedFor(ctx, r.Client, host)
		if err != nil {
			return nil, err
		}
		for _, gw := range gws {
			objs = append(objs, gw)
		}
	}
	pubhost.SortOldestFirst(objs)
	var out []string
	for _, o := range objs {
		if !slices.Contains(out, o.GetNamespace()) {
			out = append(out, o.GetNamespace())
		}
	}
	return out, nil
}
