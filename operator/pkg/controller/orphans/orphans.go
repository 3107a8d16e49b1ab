// Package orphans revokes tunnel keys whose resource no longer exists: a
// Tunnel deleted while the operator was down never ran its finalizer
// (R19). It runs once when the controller becomes leader, then hourly, and
// touches only keys labelled with this cluster's id.
package orphans

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
)

// Collector is a leader-only manager runnable.
type Collector struct {
	// Reader reads owners directly (not from the cache, which may not have
	// synced every kind this collector checks).
	Reader client.Reader
	// Cached, when set, is asked first: an owner it holds with the key's
	// UID is alive without a request. Only an owner it does not hold, or
	// holds with another UID, is read with Reader, since a cache may lag
	// behind a create and a key cut by mistake cuts a tunnel. At 10,000
	// Tunnels, the sweep at the controller's start read every one of them
	// from the apiserver while the agent reconnected them.
	Cached    client.Reader
	Writer    client.Client
	Edge      edgeapi.TunnelKeys
	ClusterID string
	Namespace string
	Interval  time.Duration
	Revoked   func()
	// IngressHosts returns the hosts served Ingresses publish now; keys of
	// kind Ingress belong to a host, not to one object. Nil: such keys are
	// kept.
	IngressHosts func(ctx context.Context) (map[string]bool, error)
	// Watches reports whether the controller handles a namespace
	// (--watch-namespaces). Keys of Tunnels elsewhere are kept: the
	// controller may not read those Tunnels, so it cannot tell that they
	// are gone. Nil: every namespace.
	Watches func(namespace string) bool
}

// NeedLeaderElection makes only the leader collect.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start collects now and then every Interval until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	interval := c.Interval
	if interval <= 0 {
		interval = time.Hour
	}
	logger := log.FromContext(ctx).WithName("orphan-keys")
	for {
		if n, err := c.Collect(ctx); err != nil {
			logger.Error(err, "collecting orphan tunnel keys; will retry")
			interval = min(interval, time.Minute)
		} else if n > 0 {
			logger.Info("revoked tunnel keys of deleted resources", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// Collect revokes this cluster's keys whose owner is gone and returns how
// many it revoked.
func (c *Collector) Collect(ctx context.Context) (int, error) {
	return c.collect(ctx, map[string]string{edgeapi.LabelCluster: c.ClusterID})
}

// CollectTunnel revokes the keys of the Tunnel namespace/name whose Tunnel
// is gone (or is another Tunnel of the same name now), at once rather than
// at the next sweep. The Tunnel reconciler calls it when a Tunnel it was
// told about no longer exists: its finalizer is not always what let it go.
// The kube-apiserver may delete an object whose finalizer was added while
// the deletion was in flight (kubernetes/kubernetes#77988), and a user may
// remove a finalizer by hand; either way a key issued for the Tunnel would
// otherwise hold its address (its claim on a bare subdomain) until the
// hourly sweep.
func (c *Collector) CollectTunnel(ctx context.Context, key types.NamespacedName) (int, error) {
	return c.collect(ctx, map[string]string{edgeapi.LabelCluster: c.ClusterID, edgeapi.LabelKind: "Tunnel",
		edgeapi.LabelNamespace: key.Namespace, edgeapi.LabelName: key.Name})
}

// collect revokes the keys matching selector (which names this cluster)
// whose owner is gone.
func (c *Collector) collect(ctx context.Context, selector map[string]string) (int, error) {
	keys, err := c.Edge.ListTunnelKeys(ctx, selector)
	if err != nil {
		return 0, fmt.Errorf("listing tunnel keys: %w", err)
	}
	revoked := 0
	var hosts map[string]bool // read once, on the first Ingress key
	for _, k := range keys {
		if !selects(selector, k.Labels) {
			continue // the edge filtered already; never trust that alone
		}
		if k.Labels[edgeapi.LabelKind] == "Ingress" && hosts == nil && c.IngressHosts != nil {
			if hosts, err = c.IngressHosts(ctx); err != nil {
				return revoked, fmt.Errorf("listing served Ingress hosts: %w", err)
			}
		}
		alive, err := c.ownerExists(ctx, k.Labels, hosts)
		if err != nil {
			return revoked, err
		}
		if alive {
			continue
		}
		if err := c.Edge.RevokeTunnelKey(ctx, k.ID); err != nil {
			return revoked, fmt.Errorf("revoking orphan key %s: %w", k.ID, err)
		}
		revoked++
		if c.Revoked != nil {
			c.Revoked()
		}
		kind, uid := k.Labels[edgeapi.LabelKind], types.UID(k.Labels[edgeapi.LabelUID])
		name := keysecret.Name(kind, uid)
		if kind == "Ingress" {
			name = keysecret.HostName(k.Labels[edgeapi.LabelHost])
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
		if err := c.Writer.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return revoked, fmt.Errorf("deleting key Secret %s: %w", secret.Name, err)
		}
		log.FromContext(ctx).Info("revoked orphan tunnel key", "keyID", k.ID, "owner", k.Labels[edgeapi.LabelNamespace]+"/"+k.Labels[edgeapi.LabelName], "host", k.Labels[edgeapi.LabelHost])
	}
	return revoked, nil
}

// ownerExists reports whether the resource a key was issued for still
// exists with the same UID; for an Ingress host's key, whether a served
// Ingress still has a rule for the host (hosts nil: unknown, kept).
// Unknown kinds are kept: better a stray key than a cut tunnel.
func (c *Collector) ownerExists(ctx context.Context, labels map[string]string, hosts map[string]bool) (bool, error) {
	var obj client.Object
	switch labels[edgeapi.LabelKind] {
	case "Tunnel":
		obj = &tunav1.Tunnel{}
	case "Ingress":
		return hosts == nil || labels[edgeapi.LabelHost] == "" || hosts[labels[edgeapi.LabelHost]], nil
	default:
		return true, nil
	}
	key := types.NamespacedName{Namespace: labels[edgeapi.LabelNamespace], Name: labels[edgeapi.LabelName]}
	if c.Watches != nil && !c.Watches(key.Namespace) {
		return true, nil
	}
	if c.Cached != nil {
		if err := c.Cached.Get(ctx, key, obj); err == nil && string(obj.GetUID()) == labels[edgeapi.LabelUID] {
			return true, nil
		}
	}
	if err := c.Reader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s %s: %w", labels[edgeapi.LabelKind], key, err)
	}
	return string(obj.GetUID()) == labels[edgeapi.LabelUID], nil
}

// selects reports whether labels carry every label of selector.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
