// Package sessions keeps the Tunnels' status.agents entries true to the
// edge: an entry whose session the edge no longer lists is removed, so a
// replica that died (SIGKILL, a lost node) stops counting as a live session
// as soon as the edge has closed its session, not only once its heartbeat
// Lease lapses (operator/pkg/agent's Heartbeat, whichever comes first).
//
// The agents hold no API key, so the controller, which does, asks the edge:
// one call per interval, and only while some Tunnel has a connected entry,
// for the sessions of this cluster's keys that began or ended since the
// last (GET /v1/sessions with the last answer's cursor), so a check costs
// what changed, not every session again. A cluster of
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
	SessionChanges(ctx context.Context, labels map[string]string, since string) (*apiwire.SessionChanges, error)
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
	// live are the edge's live sessions of this cluster's keys, by key,
	// as of cursor: the last answer's, whose changes come next.
	live   map[string]map[string]bool
	cursor string
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
	// Read only, so the cached Tunnels are not copied each check.
	if err := p.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
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
		p.forget()
		return nil
	}
	nodes, err := p.Edge.Nodes(ctx)
	if err != nil {
		return err
	}
	if len(nodes) != 1 {
		p.forget()
		return nil // a cluster of edges: no node lists every session
	}
	if err := p.follow(ctx); err != nil {
		return err
	}
	missing := map[entry]bool{}
	var errs []error
	for _, tun := range candidates {
		sessions := p.live[tun.Status.KeyID]
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

// follow brings live up to date: the changes since the last answer, or
// every live session when the edge answers in full (the first call, or a
// cursor it no longer follows).
func (p *Pruner) follow(ctx context.Context) error {
	ch, err := p.Edge.SessionChanges(ctx, map[string]string{edgeapi.LabelCluster: p.ClusterID, edgeapi.LabelKind: "Tunnel"}, p.cursor)
	if err != nil {
		return err
	}
	if ch.Full || p.live == nil {
		p.live = map[string]map[string]bool{}
	}
	for _, c := range ch.Items {
		ids := p.live[c.KeyID]
		switch {
		case c.Ended:
			delete(ids, c.ID)
			if len(ids) == 0 {
				delete(p.live, c.KeyID)
			}
		case ids == nil:
			p.live[c.KeyID] = map[string]bool{c.ID: true}
		default:
			ids[c.ID] = true
		}
	}
	p.cursor = ch.Cursor
	return nil
}

// forget drops what the checks followed: with no entry to check, nothing
// is asked of the edge, and the next check starts from every session.
func (p *Pruner) forget() { p.missing, p.live, p.cursor = nil, nil, "" }

func hasConnected(tun *tunav1.Tunnel) bool {
	for _, e := range tun.Status.Agents {
		if e.Connected {
			return true
		}
	}
	return false
}
