package sshd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/acl"
	"code.tuna.am/tuna/k8s-operator/edge/internal/auth"
	"code.tuna.am/tuna/k8s-operator/edge/internal/keyhash"
	"code.tuna.am/tuna/k8s-operator/edge/internal/names"
	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// refusal is a bind failure as sent to the agent.
func refusal(code, format string, args ...any) *protocol.ErrorReply {
	return &protocol.ErrorReply{Code: code, Error: fmt.Sprintf(format, args...)}
}

// owner is the owner identity this session binds as: the tunnel key's
// owner, or "key:<id>" for an API key with tunnels:connect (a user's own
// key owns what it claims, apart from every cluster).
func (ss *session) owner() string {
	if tk := ss.p.Tunnel; tk != nil {
		return tk.Owner
	}
	return "key:" + ss.p.ID
}

// storeRefusal answers a bind that the edge could not check because a
// read of its state failed: state_unavailable when the store is slow or
// out of reach (a cluster's etcd without quorum), which the agent retries
// shortly, as it does a login refused so; otherwise invalid_request.
func storeRefusal(err error, format string, args ...any) *protocol.ErrorReply {
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, store.ErrUnavailable) {
		return refusal(protocol.CodeStateUnavailable, "%s: the edge cannot reach its state store (%v); retry shortly", what, err)
	}
	return refusal(protocol.CodeInvalidRequest, "%s: %v", what, err)
}

// ownedRefusal answers a bind of an address another owner holds.
func ownedRefusal(err error) *protocol.ErrorReply {
	var oe *store.OwnedError
	if !errors.As(err, &oe) {
		return storeRefusal(err, "checking the owner of the address")
	}
	r := refusal(protocol.CodeAddressOwned,
		"address %s belongs to owner %s: ask that owner to share it with yours, or choose another address", oe.Address, oe.Owner)
	r.Owner = oe.Owner
	return r
}

// bind handles one BindRequest and records the outcome in metrics.
func (ss *session) bind(payload []byte) (protocol.BindReply, *protocol.ErrorReply) {
	var req protocol.BindRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		ss.srv.m.Bind("unknown", protocol.CodeInvalidRequest)
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "bind request is not valid JSON: %v", err)
	}
	reply, rerr := ss.bindParsed(req)
	result := "ok"
	if rerr != nil {
		result = rerr.Code
	}
	proto := req.Protocol
	if proto != protocol.ProtocolHTTP && proto != protocol.ProtocolTCP {
		proto = "unknown"
	}
	ss.srv.m.Bind(proto, result)
	if rerr != nil {
		ss.srv.log.Info("bind refused", "session", ss.id, "code", rerr.Code, "reason", rerr.Error)
	} else {
		ss.srv.log.Info("bound", "session", ss.id, "url", reply.URL)
	}
	return reply, rerr
}

func (ss *session) bindParsed(req protocol.BindRequest) (protocol.BindReply, *protocol.ErrorReply) {
	if req.Protocol != protocol.ProtocolHTTP && req.Protocol != protocol.ProtocolTCP {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "protocol must be %q or %q, got %q",
			protocol.ProtocolHTTP, protocol.ProtocolTCP, req.Protocol)
	}
	tk := ss.p.Tunnel
	if tk != nil {
		// The key may have expired since login (renewals change the stored
		// record, not the one the session holds).
		cur, err := ss.srv.st.GetTunnelKey(tk.ID)
		if err == nil && cur.Expired(time.Now()) {
			return protocol.BindReply{}, refusal(protocol.CodeKeyExpired, "%v", &auth.ExpiredError{ID: cur.ID, At: cur.ExpiresAt})
		}
	}
	if tk != nil && tk.Protocol != req.Protocol {
		return protocol.BindReply{}, refusal(protocol.CodeForbidden, "this tunnel key is for %s tunnels, not %s", tk.Protocol, req.Protocol)
	}
	list, err := acl.Parse(req.AllowCIDRs, req.DenyCIDRs)
	if err != nil {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "%v", err)
	}
	switch req.ProxyProtocol {
	case "", "v1", "v2":
	default:
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "proxy_protocol must be \"\", \"v1\" or \"v2\", got %q", req.ProxyProtocol)
	}
	if req.ProxyProtocol != "" && req.Protocol != protocol.ProtocolTCP {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "proxy_protocol applies to tcp tunnels only")
	}
	if req.Protocol == protocol.ProtocolHTTP {
		return ss.bindHTTP(req, list)
	}
	return ss.bindTCP(req, list)
}

// checkOneBind keeps a tunnel key to one address per session, and any
// session to BindsPerSession; binding the same address again answers with
// the existing reply, so an agent may retry.
func (ss *session) checkOneBind(addr string) (protocol.BindReply, bool, *protocol.ErrorReply) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if r, ok := ss.bound(addr); ok {
		return r, true, nil
	}
	if ss.p.Kind == keys.KindTunnel && len(ss.binds) > 0 {
		return protocol.BindReply{}, false, refusal(protocol.CodeForbidden, "a tunnel key carries one tunnel and this session is already bound")
	}
	if limit := ss.srv.cfg.Limits.BindsPerSession; limit > 0 && len(ss.binds) >= limit {
		ss.srv.m.LimitRefused(metrics.LimitBindsPerSession)
		err := &registry.LimitError{Limit: metrics.LimitBindsPerSession, Value: limit,
			What: fmt.Sprintf("this session already binds %d addresses; open another session for more", len(ss.binds))}
		return protocol.BindReply{}, false, &protocol.ErrorReply{Code: protocol.CodeLimitExceeded, Error: err.Error()}
	}
	return protocol.BindReply{}, false, nil
}

// keyElsewhere refuses a bind of a one-address key whose other sessions
// serve another address.
func keyElsewhere(addr string) *protocol.ErrorReply {
	return refusal(protocol.CodeForbidden, "a tunnel key serves one address and its other live sessions serve %s: bind that, or use another key", addr)
}

func (ss *session) remember(addr string, r protocol.BindReply) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.binds = append(ss.binds, boundAddr{addr: addr, reply: r})
}

// bound is the reply of an address the session binds (under ss.mu).
func (ss *session) bound(addr string) (protocol.BindReply, bool) {
	for _, b := range ss.binds {
		if b.addr == addr {
			return b.reply, true
		}
	}
	return protocol.BindReply{}, false
}

// access checks the access policy a bind names: a policy of the session's
// owner, on an address that owner holds (not one merely shared with it).
// The policy need not exist yet: until it does, the address refuses every
// request, so a bind never serves unguarded what it asked to guard.
func (ss *session) access(proto, addr, name string) (registry.Access, *protocol.ErrorReply) {
	if name == "" {
		return registry.Access{}, nil
	}
	if err := names.CheckDomain(name + ".x"); err != nil || len(name) > 253 {
		return registry.Access{}, refusal(protocol.CodeInvalidRequest, "access_policy %q is not the name of a policy (lowercase letters, digits, '-' and '.')", name)
	}
	owner := ss.owner()
	if err := ss.srv.st.CheckAttach(proto, addr, owner); err != nil {
		var oe *store.OwnedError
		if errors.As(err, &oe) {
			r := refusal(protocol.CodeAddressOwned,
				"address %s belongs to owner %s: only its owner may put an access policy on it; publish without one, or ask the owner to attach theirs",
				oe.Address, oe.Owner)
			r.Owner = oe.Owner
			return registry.Access{}, r
		}
		return registry.Access{}, storeRefusal(err, "checking the owner of %s", addr)
	}
	return registry.Access{Bound: owner + "/" + name}, nil
}

// resolveHost turns an http bind into the host it publishes.
func (ss *session) resolveHost(req protocol.BindRequest) (string, *protocol.ErrorReply) {
	base := ss.srv.cfg.BaseDomain
	tk := ss.p.Tunnel
	if req.Subdomain == "" && req.Domain == "" && tk != nil && tk.Address != "" {
		// The key's address goes through the same checks as an explicit
		// domain: it may name a custom domain that is unverified or gone.
		req.Domain = tk.Address
	}
	if req.Subdomain == "" && req.Domain == "" && tk != nil {
		// A key for any address that its other sessions have bound already
		// joins their pool rather than taking a second address.
		if host, ok := strings.CutPrefix(ss.srv.reg.KeyAddress(tk.ID), "http:"); ok {
			req.Domain = host
		}
	}
	switch {
	case req.Subdomain != "" && req.Domain != "":
		return "", refusal(protocol.CodeInvalidRequest, "give either subdomain or domain, not both")
	case req.Subdomain != "":
		if err := names.CheckLabel(req.Subdomain); err != nil {
			return "", refusal(protocol.CodeInvalidRequest, "subdomain: %v", err)
		}
		return req.Subdomain + "." + base, nil
	case req.Domain != "":
		host := names.Normalize(req.Domain)
		if ip, err := netip.ParseAddr(host); err == nil {
			// A Gateway address of the edge: only through a key issued
			// for it, which claimed it.
			if tk == nil || tk.Address != ip.String() || ss.srv.cfg.Claimable == nil || !ss.srv.cfg.Claimable(ip.String()) {
				return "", refusal(protocol.CodeForbidden, "address %s is bound only with a tunnel key issued for it", host)
			}
			return ip.String(), nil
		}
		if err := names.CheckHost(host); err != nil {
			return "", refusal(protocol.CodeInvalidRequest, "domain: %v", err)
		}
		if _, ok := names.SubdomainOf(host, base); ok {
			return host, nil
		}
		d, err := ss.srv.st.GetDomain(host)
		if errors.Is(err, store.ErrNotFound) && tk != nil && tk.Address == host && ss.srv.cfg.Claimable != nil && ss.srv.cfg.Claimable(host) {
			return host, nil // claimed by the key's owner when it was issued
		}
		if errors.Is(err, store.ErrNotFound) {
			return "", refusal(protocol.CodeAddressNotFound, "domain %s is not reserved on this edge", host)
		}
		if err != nil {
			return "", storeRefusal(err, "looking up domain %s", host)
		}
		if d.Custom && !d.Verified {
			return "", refusal(protocol.CodeForbidden, "custom domain %s is not verified yet: create its DNS records and verify it", host)
		}
		return host, nil
	}
	// No address asked for: a random subdomain, as a quick tunnel would get.
	return "t" + keyhash.RandomToken(5) + "." + base, nil
}

func (ss *session) bindHTTP(req protocol.BindRequest, list *acl.List) (protocol.BindReply, *protocol.ErrorReply) {
	host, rerr := ss.resolveHost(req)
	if rerr != nil {
		return protocol.BindReply{}, rerr
	}
	if tk := ss.p.Tunnel; tk != nil && tk.Address != "" && tk.Address != host {
		return protocol.BindReply{}, refusal(protocol.CodeForbidden, "this tunnel key may only bind %s, not %s", tk.Address, host)
	}
	if r, ok, rerr := ss.checkOneBind("http:" + host); ok || rerr != nil {
		return r, rerr
	}
	if err := ss.srv.st.CheckHost(host, ss.owner()); err != nil {
		return protocol.BindReply{}, ownedRefusal(err)
	}
	access, rerr := ss.access(protocol.ProtocolHTTP, host, req.AccessPolicy)
	if rerr != nil {
		return protocol.BindReply{}, rerr
	}
	// Set before the address serves, so that its first stream may be framed.
	ss.frames.Store(slices.Contains(req.Features, protocol.FeatureHTTPFrames))
	url := ss.srv.cfg.PublicURL(host)
	_, err := ss.srv.reg.BindHTTP(ss, host, url, list, access)
	if errors.Is(err, registry.ErrAddressTaken) {
		return protocol.BindReply{}, refusal(protocol.CodeAddressTaken, "%s is already served by another live tunnel", host)
	}
	if errors.Is(err, registry.ErrKeyBoundElsewhere) {
		return protocol.BindReply{}, keyElsewhere(ss.srv.reg.KeyAddress(ss.p.ID))
	}
	if err != nil {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "binding %s: %v", host, err)
	}
	reply := protocol.BindReply{URL: url, SessionID: ss.id}
	ss.remember("http:"+host, reply)
	return reply, nil
}

// resolveEndpoint finds the reserved TCP endpoint an alias or port names.
func (ss *session) resolveEndpoint(alias string) (store.TCPEndpoint, *protocol.ErrorReply) {
	cfg := ss.srv.cfg
	if port, err := strconv.Atoi(alias); err == nil {
		if port < cfg.TCPPortFirst || port > cfg.TCPPortLast {
			return store.TCPEndpoint{}, refusal(protocol.CodeAddressNotFound, "port %d is outside the edge's TCP range %d-%d", port, cfg.TCPPortFirst, cfg.TCPPortLast)
		}
		ep, err := ss.srv.st.TCPEndpointByPort(port)
		if errors.Is(err, store.ErrUnavailable) {
			return store.TCPEndpoint{}, storeRefusal(err, "looking up port %d", port)
		}
		if err != nil {
			return store.TCPEndpoint{}, refusal(protocol.CodeAddressNotFound, "port %d is not reserved: create a TCP endpoint first", port)
		}
		return ep, nil
	}
	ep, err := ss.srv.st.GetTCPEndpoint(alias)
	if errors.Is(err, store.ErrUnavailable) {
		return store.TCPEndpoint{}, storeRefusal(err, "looking up TCP endpoint %q", alias)
	}
	if err != nil {
		return store.TCPEndpoint{}, refusal(protocol.CodeAddressNotFound, "TCP endpoint %q is not reserved on this edge", alias)
	}
	return ep, nil
}

func (ss *session) bindTCP(req protocol.BindRequest, list *acl.List) (protocol.BindReply, *protocol.ErrorReply) {
	tk := ss.p.Tunnel
	alias := req.Alias
	if alias == "" && tk != nil {
		alias = tk.Address
	}
	if alias == "" {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "tcp bind needs an alias or a reserved port")
	}
	ep, rerr := ss.resolveEndpoint(alias)
	if rerr != nil {
		return protocol.BindReply{}, rerr
	}
	if tk != nil && tk.Address != "" && tk.Address != ep.Alias && tk.Address != strconv.Itoa(ep.Port) {
		return protocol.BindReply{}, refusal(protocol.CodeForbidden, "this tunnel key may only bind %s, not %s", tk.Address, alias)
	}
	if r, ok, rerr := ss.checkOneBind("tcp:" + ep.Alias); ok || rerr != nil {
		return r, rerr
	}
	if !ep.Allows(ss.owner()) {
		return protocol.BindReply{}, ownedRefusal(&store.OwnedError{Address: ep.Alias, Owner: ep.Owner})
	}
	access, rerr := ss.access(protocol.ProtocolTCP, ep.Alias, req.AccessPolicy)
	if rerr != nil {
		return protocol.BindReply{}, rerr
	}
	cfg := ss.srv.cfg
	url := "tcp://" + net.JoinHostPort(cfg.PublicTCPHost, strconv.Itoa(ep.Port))
	pool, err := ss.srv.reg.BindTCP(ss.id, ep.Port, url, list, req.ProxyProtocol, access)
	if errors.Is(err, registry.ErrAddressTaken) {
		return protocol.BindReply{}, refusal(protocol.CodeAddressTaken, "TCP endpoint %s (port %d) is already served by another live tunnel", ep.Alias, ep.Port)
	}
	if errors.Is(err, registry.ErrKeyBoundElsewhere) {
		return protocol.BindReply{}, keyElsewhere(ss.srv.reg.KeyAddress(ss.p.ID))
	}
	if err != nil {
		return protocol.BindReply{}, refusal(protocol.CodeInvalidRequest, "binding %s: %v", ep.Alias, err)
	}
	// The listener serves the pool, whichever of its sessions attached it
	// (attaching again for the same pool changes nothing).
	serve := func(c net.Conn) { ss.srv.serveTCP(c, pool) }
	if err := cfg.Ports.Attach(ep.Port, pool.ID(), serve); err != nil {
		ss.srv.reg.UnbindTCP(ss.id, ep.Port)
		return protocol.BindReply{}, refusal(protocol.CodeAddressTaken,
			"the edge cannot listen on port %d of TCP endpoint %s: %v; another process on the edge host holds it: free the port, or delete the endpoint and reserve a new one",
			ep.Port, ep.Alias, err)
	}
	// bind runs inside run()'s request loop, so the session's teardown,
	// which detaches ss.ports, cannot have started yet.
	ss.mu.Lock()
	if ss.ports == nil {
		ss.ports = map[int]*registry.Pool{}
	}
	ss.ports[ep.Port] = pool
	ss.mu.Unlock()
	reply := protocol.BindReply{URL: url, SessionID: ss.id}
	ss.remember("tcp:"+ep.Alias, reply)
	return reply, nil
}
