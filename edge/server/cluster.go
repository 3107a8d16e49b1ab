package server

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// An edge is one node or a cluster of nodes sharing their state in etcd.
// Every node serves the API, the SSH transport and the public listeners,
// routes public traffic only to its own sessions, and follows what other
// nodes change through the store's watch (follow below): a key revoked
// through one node ends its sessions on every node.

// DefaultNodeTTL is the lease of a node's record: a node that dies drops
// out of GET /v1/nodes this long after its last renewal.
const DefaultNodeTTL = 10 * time.Second

// clustered reports whether the configuration shares the state in etcd.
func (c *Config) clustered() bool { return len(c.Etcd.Endpoints) > 0 }

// checkCluster refuses a cluster node that would generate what every node
// must share: each would make its own, and agents pinning one node's SSH
// host key, or secrets sealed by one node's key, would fail on the others.
func (c *Config) checkCluster() error {
	if !c.clustered() {
		return nil
	}
	if _, err := os.Stat(c.HostKeyFile); err != nil {
		return fmt.Errorf("config: with --etcd-endpoints every node needs the same SSH host key, so none is generated: "+
			"copy %s from a node of the cluster (or create the cluster's keys once with `tuna-edge cluster-keys`): %w", c.HostKeyFile, err)
	}
	if c.SecretsKeyFile == "" && len(c.SecretsKeys) == 0 {
		return errors.New("config: with --etcd-endpoints every node needs the same secrets key, so none is generated: " +
			"give every node the same --secrets-key-file (or TUNA_EDGE_SECRETS_KEY)")
	}
	if c.APITLSCert == "" && !c.InsecureHTTPAPI {
		return errors.New("config: with --etcd-endpoints every node must present the API certificate clients pin, so none is generated: " +
			"give every node the same --api-tls-cert and --api-tls-key")
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("config: no --node-name and no host name: %w", err)
		}
		c.NodeName = h
	}
	if c.NodeTTL <= 0 {
		c.NodeTTL = DefaultNodeTTL
	}
	return nil
}

// openStore opens the bbolt file, or etcd for a cluster node.
func openStore(cfg *Config, obs store.Observer) (*store.Store, error) {
	if !cfg.clustered() {
		return store.Open(cfg.DataDir)
	}
	ec := cfg.Etcd
	ec.Observer = obs
	st, err := store.OpenEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("opening the state store in etcd: %w", err)
	}
	return st, nil
}

// checkIdentity makes sure this node presents the SSH host key the
// cluster's agents pin: the first node records it, the others must match.
func (e *Edge) checkIdentity() error {
	recorded, err := e.st.ClaimIdentity("ssh_host_key", e.HostKey())
	if err != nil {
		return fmt.Errorf("checking the cluster's SSH host key: %w", err)
	}
	if recorded != e.HostKey() {
		return fmt.Errorf("this node's SSH host key (%s) is not the cluster's (%s), which agents pin: "+
			"copy the host key file of a node of the cluster to %s", e.HostKey(), recorded, e.cfg.HostKeyFile)
	}
	return nil
}

// nodeRecord is what this node announces; e.mu must be held.
func (e *Edge) nodeRecord() store.Node {
	info := e.infoOf(e.sshAddr, e.httpAddr, e.httpsAddr)
	api := e.cfg.APIAdvertiseURL
	if api == "" {
		api = e.apiURL
	}
	return store.Node{Name: e.cfg.NodeName, APIURL: api, SSHAddr: info.SSHAddr, HTTPURL: info.HTTPURL,
		HTTPSURL: info.HTTPSURL, StartedAt: e.startedAt}
}

// Nodes lists the edge's live nodes for GET /v1/nodes: this one alone for
// a single edge, else every node whose lease is alive.
func (e *Edge) Nodes() ([]apiwire.Node, error) {
	if !e.st.Shared() {
		e.mu.Lock()
		n := e.nodeRecord()
		e.mu.Unlock()
		return []apiwire.Node{nodeOut(n, true)}, nil
	}
	ns, err := e.st.Nodes()
	if err != nil {
		return nil, err
	}
	out := make([]apiwire.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, nodeOut(n, n.Name == e.cfg.NodeName))
	}
	return out, nil
}

// pushNodes tells this node's sessions which nodes serve the cluster: the
// live ones that are not draining, each with the ID of its run, so an agent
// tells a restarted node from the one that drained. Heartbeats change no
// entry, so they send nothing.
func (e *Edge) pushNodes() {
	ns, err := e.st.Nodes()
	if err != nil {
		return
	}
	out := make([]protocol.Node, 0, len(ns))
	for _, n := range ns {
		if n.Draining || n.SSHAddr == "" {
			continue
		}
		out = append(out, protocol.Node{SSHAddr: n.SSHAddr, ID: n.Name + "@" + n.StartedAt.Format(time.RFC3339Nano)})
	}
	e.ssh.SetNodes(out)
}

func nodeOut(n store.Node, self bool) apiwire.Node {
	return apiwire.Node{Name: n.Name, APIURL: n.APIURL, SSHAddr: n.SSHAddr, HTTPURL: n.HTTPURL, HTTPSURL: n.HTTPSURL,
		Draining: n.Draining, StartedAt: n.StartedAt, Self: self}
}

// follower applies other nodes' changes to this node's sessions and
// listeners, in the order etcd made them. A change this node made itself
// comes back too; acting on it again is harmless (the sessions are gone,
// the port is held already).
type follower struct {
	e     *Edge
	queue chan store.Change
	quit  chan struct{}
	done  chan struct{}
	// ends are terminations in flight: each waits briefly for its agent's
	// acknowledgement, so they run apart from the queue.
	ends sync.WaitGroup
}

func (e *Edge) startFollower() *follower {
	f := &follower{e: e, queue: make(chan store.Change, 1024), quit: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	// The watch waits on a full queue rather than dropping a change.
	e.st.OnChange(func(c store.Change) {
		select {
		case f.queue <- c:
		case <-f.quit:
		}
	})
	return f
}

func (f *follower) stop() {
	close(f.quit)
	<-f.done
	f.ends.Wait()
}

func (f *follower) run() {
	defer close(f.done)
	for {
		select {
		case c := <-f.queue:
			f.apply(c)
		case <-f.quit:
			return
		}
	}
}

func (f *follower) apply(c store.Change) {
	e := f.e
	switch c.Kind {
	case store.KindTunnelKey:
		if c.Next == nil {
			f.end(func() {
				e.reg.TerminateKey(c.Name, protocol.CodeKeyRevoked, fmt.Sprintf("tunnel key %s was revoked", c.Name))
			})
		}
	case store.KindAPIKey:
		if c.Next == nil {
			f.end(func() {
				e.reg.TerminateKey(c.Name, protocol.CodeKeyRevoked, fmt.Sprintf("API key %s was revoked", c.Name))
			})
		}
	case store.KindDomain:
		if c.Next == nil {
			f.end(func() {
				e.reg.TerminateHost(c.Name, protocol.CodeAddressNotFound, fmt.Sprintf("domain %s was deleted", c.Name))
			})
		} else if d := c.Next.(*store.Domain); c.Prev != nil {
			e.reg.DomainPolicyChanged(d.Name)
			f.end(func() { e.api.EndUnshared(protocol.ProtocolHTTP, []string{d.Name}, d.Ownership) })
		}
	case store.KindTCPEndpoint:
		f.tcp(c)
	case store.KindSecret:
		e.secrets.Notify()
	case store.KindAccessPolicy:
		e.access.Reload(c.Name)
	case store.KindAccessKeys:
		if err := e.access.ReloadKeys(); err != nil {
			e.log.Error("reloading the access keys another node rotated failed", "err", err)
		}
	case store.KindNode:
		if ns, err := e.st.Nodes(); err == nil {
			e.m.Nodes(len(ns))
		}
		e.pushNodes()
	}
}

// tcp keeps a reserved port held on every node, so a TCP endpoint has the
// same port on each.
func (f *follower) tcp(c store.Change) {
	e := f.e
	switch {
	case c.Next != nil && c.Prev == nil:
		ep := c.Next.(*store.TCPEndpoint)
		if err := e.ports.Hold(ep.Port); err != nil {
			e.log.Warn("cannot listen on the port of a TCP endpoint another node reserved", "alias", ep.Alias, "port", ep.Port, "err", err)
		}
	case c.Next != nil:
		ep := c.Next.(*store.TCPEndpoint)
		f.end(func() {
			e.api.EndUnshared(protocol.ProtocolTCP, []string{ep.Alias, strconv.Itoa(ep.Port)}, ep.Ownership)
		})
	default:
		ep := c.Prev.(*store.TCPEndpoint)
		// The port may already be another endpoint's, reserved through
		// this node after the deletion: leave it to that one then. A
		// store that cannot answer keeps the port held until a restart.
		cur, err := e.st.TCPEndpointByPort(ep.Port)
		if err == nil {
			e.log.Debug("a deleted TCP endpoint's port is reserved again", "port", ep.Port, "alias", cur.Alias)
			return
		}
		if errors.Is(err, store.ErrNotFound) {
			e.ports.Release(ep.Port)
		}
		f.end(func() {
			e.reg.TerminatePort(ep.Port, protocol.CodeAddressNotFound, fmt.Sprintf("TCP endpoint %s (port %d) was deleted", ep.Alias, ep.Port))
		})
	}
}

func (f *follower) end(fn func()) { f.ends.Go(fn) }
