package hosttunnel

import (
	"context"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// writeStatus sets status.loadBalancer.ingress of each Ingress to the
// hostnames of its connected hosts (external-dns and Argo CD read it), with
// server-side apply as field manager tuna-agent. An Ingress with no
// connected host gets an empty apply, which drops the agent's entries
// without touching what another controller may have written. Writes are
// serialised: several hosts of one Ingress may change at once.
func (r *Reconciler) writeStatus(ctx context.Context, keys []types.NamespacedName) {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	if r.written == nil {
		r.written = map[types.NamespacedName]written{}
	}
	done := map[types.NamespacedName]bool{}
	for _, key := range keys {
		if done[key] {
			continue
		}
		done[key] = true
		var ing networkingv1.Ingress
		if err := r.Client.Get(ctx, key, &ing); err != nil {
			if apierrors.IsNotFound(err) {
				delete(r.written, key) // gone: forget what it was told
				r.notes.Forget(key)
			} else {
				log.FromContext(ctx).Error(err, "reading Ingress for its status", "ingress", key.String())
			}
			continue
		}
		names := r.hostnames(&ing)
		want := strings.Join(names, ",")
		have := strings.Join(current(&ing), ",")
		if w, ok := r.written[key]; ok && w.uid == ing.UID {
			have = w.hostnames
		}
		if have == want {
			r.written[key] = written{uid: ing.UID, hostnames: want}
			continue
		}
		values := map[string]any{}
		if len(names) > 0 {
			entries := make([]any, 0, len(names))
			for _, n := range names {
				entries = append(entries, map[string]any{"hostname": n})
			}
			values["loadBalancer"] = map[string]any{"ingress": entries}
		}
		err := status.Apply(ctx, r.Client, networkingv1.SchemeGroupVersion.WithKind("Ingress"), key, status.AgentFieldOwner, status.Fields{Values: values})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				log.FromContext(ctx).Error(err, "writing Ingress status", "ingress", key.String())
			}
			continue
		}
		r.written[key] = written{uid: ing.UID, hostnames: want}
	}
}

// written is the status last applied to an Ingress.
type written struct {
	uid       types.UID
	hostnames string
}

// hostnames are the loadBalancer hostnames of ing: one per host of its
// rules that this agent serves for it and that is connected.
func (r *Reconciler) hostnames(ing *networkingv1.Ingress) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, host := range ingress.Hosts(ing) {
		h := r.hosts[host]
		if h != nil && h.connected && h.contributors[ing.UID] != nil {
			out = append(out, h.lbHostname)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func current(ing *networkingv1.Ingress) []string {
	var out []string
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.Hostname != "" {
			out = append(out, lb.Hostname)
		}
	}
	slices.Sort(out)
	return out
}
