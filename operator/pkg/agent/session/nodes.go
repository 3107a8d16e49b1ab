package session

import (
	"slices"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// A cluster of edges routes public traffic only to sessions of agents
// connected to the node that took it, so a tunnel holds a link to every
// live node. Each node lists the live nodes in its bind reply and sends the
// list again whenever it changes; the tunnel follows the union of what its
// connected links' nodes say:
//   - a node that appears gets a link (a node that restarted at the same
//     address comes back with a new ID, and a link still backing off from
//     its old run starts over at once);
//   - a node that leaves the list (drained, or its lease expired) has its
//     link retired: the session finishes what it carries and closes;
//   - a node that ends its session with edge_shutting_down is dropped for
//     that run, even while a list not yet updated still names it, instead
//     of being dialled again while it goes away.
//
// A single edge lists no nodes: then, and whenever no connected link has a
// list, the links stay as they are, so a tunnel on a single edge runs one
// link to the address it was given, exactly as without a cluster.

// retireGrace is how long the session to a node that left the list may
// finish its requests in flight: about as long as a draining edge waits for
// them.
const retireGrace = 5 * time.Second

// observe takes a node list link l's node sent.
func (t *Tunnel) observe(l *link, nl protocol.NodeList) {
	t.mu.Lock()
	if t.byAddr[l.addr] != l || l.state.Phase != PhaseConnected {
		t.mu.Unlock()
		return // retired, or its session ended meanwhile
	}
	if old, ok := t.views[l]; ok && nl.Version < old.Version {
		t.mu.Unlock()
		return // a list the node replaced already (a bind reply overtaken by a change)
	}
	t.views[l] = nl
	changed := t.followLocked()
	t.mu.Unlock()
	if changed && t.notify != nil {
		t.notify()
	}
}

// nodeShutDown drops the node of link l, which ended its session with
// edge_shutting_down, and reports whether l was retired: it is when other
// nodes' lists still give the tunnel somewhere to go.
func (t *Tunnel) nodeShutDown(l *link) bool {
	t.mu.Lock()
	if l.id == "" {
		t.mu.Unlock()
		return false
	}
	t.dropped[l.id] = true
	delete(t.views, l)
	changed := t.followLocked()
	retired := t.byAddr[l.addr] != l
	t.mu.Unlock()
	if changed && t.notify != nil {
		t.notify()
	}
	return retired
}

// followLocked makes the links match the nodes the views list and reports
// whether the merged state changed; t.mu is held.
func (t *Tunnel) followLocked() bool {
	if t.stopped {
		return false
	}
	want := map[string][]string{} // address -> node IDs listed for it
	for _, v := range t.views {
		for _, n := range v.Nodes {
			if n.SSHAddr != "" && !t.dropped[n.ID] {
				want[n.SSHAddr] = append(want[n.SSHAddr], n.ID)
			}
		}
	}
	if len(want) == 0 {
		// No list (a single edge), or every listed node shut down: keep
		// the links as they are rather than drop the last way in.
		return false
	}
	for addr, ids := range want {
		l, ok := t.byAddr[addr]
		switch {
		case !ok:
			t.startLink(addr, ids[0])
		case l.id == "" || l.state.Phase == PhaseConnected:
			if !slices.Contains(ids, l.id) {
				l.id = ids[0]
			}
		case !slices.Contains(ids, l.id):
			// The node restarted while this link backed off from its
			// old run: start over at once.
			t.retireLocked(l, 0)
			t.startLink(addr, ids[0])
		}
	}
	for addr, l := range t.byAddr {
		if _, ok := want[addr]; ok {
			continue
		}
		if addr == t.cfg.Edge.Addr && !t.servedByListedLocked(want) {
			// The address the agent was given (a load balancer or DNS
			// name in front of the nodes) stays until a listed node
			// serves the tunnel: nodes that advertise an address the
			// cluster cannot reach must not take the last way in.
			continue
		}
		l.log.Info("the edge node left the cluster's list; closing its session", "node", l.id)
		t.retireLocked(l, retireGrace)
	}
	return t.mergeLocked()
}

// servedByListedLocked reports whether a link to one of the listed
// addresses is connected; t.mu is held.
func (t *Tunnel) servedByListedLocked(want map[string][]string) bool {
	for addr := range want {
		if l, ok := t.byAddr[addr]; ok && l.state.Phase == PhaseConnected {
			return true
		}
	}
	return false
}

// fallBackLocked dials the address the agent was given again when no link
// is connected and none goes there: every listed node is unreachable, so
// the tunnel returns to its way in, which may lead to nodes that replaced
// them. t.mu is held.
func (t *Tunnel) fallBackLocked() {
	if t.stopped || t.byAddr[t.cfg.Edge.Addr] != nil {
		return
	}
	for _, l := range t.byAddr {
		if l.state.Phase == PhaseConnected {
			return
		}
	}
	t.log.Info("no edge node of the cluster's list answers; dialling the edge address again", "edge", t.cfg.Edge.Addr)
	t.startLink(t.cfg.Edge.Addr, "")
}

// retireLocked ends link l, letting its session finish its connections for
// up to grace; Stop still waits for it. t.mu is held.
func (t *Tunnel) retireLocked(l *link, grace time.Duration) {
	delete(t.byAddr, l.addr)
	delete(t.views, l)
	if grace > 0 {
		l.retire.Store(int64(grace))
	}
	l.cancel()
}
