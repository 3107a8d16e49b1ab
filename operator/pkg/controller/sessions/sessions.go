// Package sessions keeps the Tunnels' status.agents entries true to the
// edge: an entry whose session the edge no longer lists is removed, so a
// replica that died (SIGKILL, a lost node) stops counting as a live session
// as soon as the edge has closed its session, not only once its heartbeat
// Lease lapses (operator/pkg/agent's Heartbeat, whichever comes first).
//
// The agents hold no API key, so the controller, which does, asks the edge:
// one list of this cluster's tunnel keys, with their live sessions, per
// interval, and only while some Tunnel has a connected entry. A cluster of
// edge nodes has no single session list (each node lists its own), so the
// check runs against a single edge only; there the heartbeat alone prunes.
package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// DefaultInterval is how often the edge's sessions are compared with the
// entries: a dead replica's entry leaves within two of them.
const DefaultInterval = 5 * time.Second

// Edge is what the pruner asks of the edge API.
type Edge interface {
	Nodes(ctx context.Context) ([]apiwire.Node, error)
	ListTunnelKeys(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error)
}

// Pruner removes the status.agents entries whose session the edge no
// longer lists; it implements manager.Runnable, on the leader only.
type Pruner struct {
	// Client reads Tunnels (cached) and writes their status.
	Client    client.Client
	Edge      Edge
	ClusterID string
	// Interval between checks; zero: DefaultInterval.
	Interval time.Duration
	Log      logr.Logger

	// missing are the entries whose session the last check did not find:
	// an entry is removed when two checks in a row miss its session, so an
	// agent that reconnected and has not written its new session yet
	// keeps its entry.
	missing map[entry]bool
}

// entry names one replica's entry of one Tunnel, and the session it says
// it holds.
type entry struct {
	tunnel           types.UID
	replica, session string
}

// NeedLeaderElection makes only the leader check.
func (p *Pruner) NeedLeaderElection() bool { return true }

// Start checks every Interval until ctx ends.
func (p *Pruner) Start(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := p.Check(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error(err, "comparing the Tunnels' agent entries with the edge's sessions")
		}
	}
}

// Check compares every connected entry with the sessions the edge lists
// for its Tunnel's key, and removes the entries whose session two checks
// in a row did not find.
func (p *Pruner) Check(ctx context.Context) error {
	var list tunav1.TunnelList
	if err := p.Client.List(ctx, &list); err != nil {
		return err
	}
	var candidates []*tunav1.Tunnel
	for i := range list.Items {
		tun := &list.Items[i]
		if tun.Status.KeyID != "" && tun.Spec.APIKeySecretRef == nil && hasConnected(tun) {
			candidates = append(candidates, tun)
		}
	}
	if len(candidates) == 0 {
		p.missing = nil
		return nil
	}
	nodes, err := p.Edge.Nodes(ctx)
	if err != nil {
		return err
	}
	if len(nodes) != 1 {
		p.missing = nil
		return nil // a cluster of edges: no node lists every session
	}
	keys, err := p.Edge.ListTunnelKeys(ctx, map[string]string{edgeapi.LabelCluster: p.ClusterID, edgeapi.LabelKind: "Tunnel"})
	if err != nil {
		return err
	}
	live := map[string]map[string]bool{}
	for _, k := range keys {
		ids := map[string]bool{}
		for _, s := range k.Sessions {
			ids[s.ID] = true
		}
		live[k.ID] = ids
	}
	missing := map[entry]bool{}
	var errs []error
	for _, tun := range candidates {
		sessions, known := live[tun.Status.KeyID]
		if !known {
			continue // a key gone on the edge: the Tunnel reconciler replaces it
		}
		for _, e := range tun.Status.Agents {
			if !e.Connected || e.SessionID == "" || sessions[e.SessionID] {
				continue
			}
			x := entry{tunnel: tun.UID, replica: e.Name, session: e.SessionID}
			if !p.missing[x] {
				missing[x] = true // first miss: look again next time
				continue
			}
			if err := status.RemoveAgentEntry(ctx, p.Client, client.ObjectKeyFromObject(tun), e.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			p.Log.Info("removed the status entry of an agent replica whose session the edge no longer lists",
				"replica", e.Name, "session", e.SessionID, "tunnel", client.ObjectKeyFromObject(tun))
		}
	}
	p.missing = missing
	return errors.Join(errs...)
}

func hasConnected(tun *tunav1.Tunnel) bool {
	for _, e := range tun.Status.Agents {
		if e.Connected {
			return true
		}
	}
	return false
}
