package sshd

import (
	"slices"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// The nodes of a cluster of edges, as agents are told of them: each bind
// reply lists them, and every live session hears of a change at once, so an
// agent holds a session to every node without asking the control API
// (which its tunnel key cannot call) and picks up a joining node within the
// time the store's watch takes to report it.

// SetNodes records the cluster's live nodes and, when they differ from the
// last list, sends the new one to every session. A single edge never calls
// it, so its bind replies list no nodes.
func (s *Server) SetNodes(nodes []protocol.Node) {
	s.nodesMu.Lock()
	if slices.Equal(nodes, s.nodes) {
		s.nodesMu.Unlock()
		return
	}
	s.nodes = slices.Clone(nodes)
	s.nodesVersion++
	list := protocol.NodeList{Nodes: s.nodes, Version: s.nodesVersion}
	targets := make([]*session, 0, len(s.live))
	for ss := range s.live {
		targets = append(targets, ss)
	}
	s.nodesMu.Unlock()
	payload := protocol.Marshal(list)
	for _, ss := range targets {
		// No reply is asked for: an agent that does not know the request
		// ignores it, and a slow agent does not hold up the others.
		go func() { _, _, _ = ss.conn.SendRequest(protocol.NodesRequestType, false, payload) }()
	}
	s.log.Info("cluster nodes changed", "nodes", len(nodes), "version", list.Version)
}

// nodeList is the current list for a bind reply: nil until SetNodes was
// called (a single edge).
func (s *Server) nodeList() *protocol.NodeList {
	s.nodesMu.Lock()
	defer s.nodesMu.Unlock()
	if s.nodesVersion == 0 {
		return nil
	}
	return &protocol.NodeList{Nodes: s.nodes, Version: s.nodesVersion}
}

// track and untrack keep the live sessions SetNodes speaks to.
func (s *Server) track(ss *session) {
	s.nodesMu.Lock()
	s.live[ss] = struct{}{}
	s.nodesMu.Unlock()
}

func (s *Server) untrack(ss *session) {
	s.nodesMu.Lock()
	delete(s.live, ss)
	s.nodesMu.Unlock()
}
