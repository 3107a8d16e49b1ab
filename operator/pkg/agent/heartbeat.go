package agent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// DefaultHeartbeatTTL is how long a replica's Lease lasts unrenewed. A
// replica renews it every third of that, so a pause of one renewal (an
// apiserver hiccup, a GC pause) does not make it look gone.
const DefaultHeartbeatTTL = 30 * time.Second

// Heartbeat keeps this replica's Lease (tuna-agent-<replica>, in the
// operator's namespace) fresh, and removes from every Tunnel the
// status.agents entries of replicas whose Lease lapsed or is gone.
//
// A replica that stops cleanly removes its own entries (Reconciler.Leave),
// but one that is SIGKILLed, or whose node is lost, cannot: its entry would
// say "connected" for ever, and status.sessions, Ready and Degraded would
// count a session that the edge closed long ago. The edge does not know
// replica names, and a cluster of edge nodes has no single list of
// sessions, so liveness comes from Kubernetes itself: a Lease per replica.
type Heartbeat struct {
	// Client writes the Lease and status; Reader reads Leases directly
	// (a cache would watch every Lease of the cluster).
	Client client.Client
	Reader client.Reader
	// Reconciler gives the replica's name and rewrites the merged status.
	Reconciler *Reconciler
	// Namespace holds the Leases: the operator's namespace.
	Namespace string
	// TTL is the Lease duration; zero: DefaultHeartbeatTTL.
	TTL time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	Log logr.Logger
}

// LeaseName is the Lease of an agent replica.
func LeaseName(replica string) string {
	name := "tuna-agent-" + invalidLeaseChars.ReplaceAllString(strings.ToLower(replica), "-")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

var invalidLeaseChars = regexp.MustCompile(`[^a-z0-9.-]`)

func (h *Heartbeat) ttl() time.Duration {
	if h.TTL <= 0 {
		return DefaultHeartbeatTTL
	}
	return h.TTL
}

func (h *Heartbeat) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Start renews the Lease and prunes until ctx ends; it implements
// manager.Runnable. RunAgent renews once before the manager starts, so a
// replica is alive before it reports any entry.
func (h *Heartbeat) Start(ctx context.Context) error {
	log := h.Log
	tick := time.NewTicker(h.ttl() / 3)
	defer tick.Stop()
	for {
		if err := h.Renew(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "renewing the agent replica's Lease")
		}
		if err := h.Prune(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "removing the status entries of agent replicas that are gone")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Renew creates or renews this replica's Lease.
func (h *Heartbeat) Renew(ctx context.Context) error {
	replica := h.Reconciler.replica()
	now := metav1.NewMicroTime(h.now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(replica),
		LeaseDurationSeconds: ptr.To(int32(h.ttl().Seconds())),
		RenewTime:            &now,
	}
	var lease coordinationv1.Lease
	err := h.Reader.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: LeaseName(replica)}, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: LeaseName(replica),
				Labels: map[string]string{"app.kubernetes.io/component": "agent", "app.kubernetes.io/managed-by": "tuna"}},
			Spec: spec,
		}
		if err := h.Client.Create(ctx, &lease); err != nil {
			return fmt.Errorf("creating Lease %s/%s: %w", h.Namespace, lease.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading Lease %s/%s: %w", h.Namespace, LeaseName(replica), err)
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = spec.HolderIdentity, spec.LeaseDurationSeconds, spec.RenewTime
	if err := h.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("renewing Lease %s/%s: %w", h.Namespace, lease.Name, err)
	}
	return nil
}

// Release deletes this replica's Lease: a replica that stops cleanly is
// gone at once for the others, not after the TTL.
func (h *Heartbeat) Release(ctx context.Context) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: LeaseName(h.Reconciler.replica())}}
	if err := h.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Lease %s/%s: %w", h.Namespace, lease.Name, err)
	}
	return nil
}

// Alive reports whether replica's Lease is held by it and unexpired.
func (h *Heartbeat) Alive(ctx context.Context, replica string) (bool, error) {
	var lease coordinationv1.Lease
	err := h.Reader.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: LeaseName(replica)}, &lease)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Lease %s/%s: %w", h.Namespace, LeaseName(replica), err)
	}
	return leaseLive(lease.Spec, replica, h.now()), nil
}

// leaseLive is a Lease held by replica whose last renewal is younger than
// its duration.
func leaseLive(s coordinationv1.LeaseSpec, replica string, now time.Time) bool {
	if s.HolderIdentity == nil || *s.HolderIdentity != replica || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// Prune removes, from every Tunnel, the entries of other replicas that are
// not alive, and rewrites the merged status without them. It removes an
// entry the way its replica would: by applying no fields under that
// replica's field manager.
func (h *Heartbeat) Prune(ctx context.Context) error {
	var list tunav1.TunnelList
	if err := h.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing Tunnels: %w", err)
	}
	self := h.Reconciler.replica()
	alive := map[string]bool{self: true}
	var errs []error
	for i := range list.Items {
		tun := &list.Items[i]
		entries := tun.Status.Agents
		for _, e := range tun.Status.Agents {
			live, known := alive[e.Name]
			if !known {
				var err error
				if live, err = h.Alive(ctx, e.Name); err != nil {
					errs = append(errs, err)
					live = true // unknown: keep the entry
				}
				alive[e.Name] = live
			}
			if live {
				continue
			}
			if err := status.RemoveAgentEntry(ctx, h.Client, client.ObjectKeyFromObject(tun), e.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			entries = withoutEntry(entries, e.Name)
			h.Log.Info("removed the status entry of an agent replica that is gone (its Lease lapsed)",
				"replica", e.Name, "tunnel", client.ObjectKeyFromObject(tun))
		}
		if len(entries) != len(tun.Status.Agents) {
			if err := h.Reconciler.writePool(ctx, tun, entries); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
