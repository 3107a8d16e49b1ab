// Package protocol defines the wire messages that flow over the SSH tunnel
// transport between tuna-edge and an agent. Both sides import it, so a change
// here is a change of the protocol: keep it backwards compatible.
//
// The flow:
//  1. The agent authenticates with SSH "password" auth, user "tuna", password
//     = a tunnel key (or a tunnels:connect API key).
//  2. The agent sends the global request BindRequestType with a JSON
//     BindRequest and wants a reply; the edge answers with a JSON BindReply
//     (success) or a JSON ErrorReply (failure).
//  3. For every public connection the edge opens a channel of type
//     ForwardChannelType whose extra data is a JSON ForwardInfo. For HTTP the
//     channel carries HTTP/1.1 from the edge (or, for an agent that named
//     FeatureHTTPFrames in its bind, frames when ForwardInfo.Framed says
//     so); for TCP, the raw client bytes.
//  4. Either side sends KeepaliveRequestType (want-reply) periodically and
//     closes the connection when replies stop.
//  5. A node of a cluster of edges lists the cluster's live nodes in its
//     BindReply, and sends NodesRequestType (no reply) with a JSON NodeList
//     whenever that set changes, so that the agent holds a session to every
//     node. A single edge lists none.
//  6. A TCP endpoint's public connection may travel outside the session
//     (package edge/streams): the edge sends StreamRequestType (no reply)
//     with a JSON StreamOpen; the agent dials a TLS connection to the
//     edge's SSH address, pins the certificate whose SHA-256 the bind reply
//     named (BindReply.StreamCert) and writes the token, or, when it
//     cannot, sends StreamFailedRequestType (no reply) with a JSON
//     StreamFailed, and the edge opens a channel instead. An agent that
//     does not know the request ignores it, and the edge falls back to
//     channels when its stream does not come.
//  7. Before the edge ends a session (key revoked or expired, edge shutting
//     down) it sends TerminateRequestType with a JSON Terminate, then closes.
//
// A refused login carries its reason in the SSH auth banner,
// "tuna-edge: <reason>"; a reason that has a stable code starts with it,
// "tuna-edge: limit_exceeded: ...". A connection refused before the SSH
// handshake (too many handshakes in progress) gets one such line before the
// SSH version exchange, which SSH clients skip, and is closed.
package protocol

import (
	"encoding/json"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

const (
	// SSHUser is the user name agents present; the password is the key.
	SSHUser = "tuna"

	BindRequestType      = "tuna-bind@tuna.am"
	KeepaliveRequestType = "keepalive@tuna.am"
	TerminateRequestType = "tuna-terminate@tuna.am"
	DrainRequestType     = "tuna-drain@tuna.am"
	// LeaveRequestType ends a drain: the edge takes the session out of
	// its pools, so no new connection comes, and replies true; it replies
	// false (nothing changed) while the session is the last live member
	// of a pool it serves that is not draining, so that the address goes
	// on being served until another member joins or the agent gives up.
	LeaveRequestType   = "tuna-leave@tuna.am"
	ForwardChannelType = "tuna-forward@tuna.am"
	NodesRequestType   = "tuna-nodes@tuna.am"
	// StreamRequestType and StreamFailedRequestType carry public
	// connections outside the session (step 6 above).
	StreamRequestType       = "tuna-stream@tuna.am"
	StreamFailedRequestType = "tuna-stream-failed@tuna.am"
)

// Protocols a tunnel can carry.
const (
	ProtocolHTTP = "http"
	ProtocolTCP  = "tcp"
)

// BindRequest asks the edge to route a public address to this session.
type BindRequest struct {
	// Protocol is "http" or "tcp".
	Protocol string `json:"protocol"`
	// Subdomain is the label under the edge's base domain (http).
	Subdomain string `json:"subdomain,omitempty"`
	// Domain is a full host name reserved on the edge (http).
	Domain string `json:"domain,omitempty"`
	// Alias names a reserved TCP endpoint, or is a port number (tcp).
	Alias string `json:"alias,omitempty"`
	// AllowCIDRs, if not empty, admits only clients from these networks.
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
	// DenyCIDRs refuses clients from these networks; deny wins over allow.
	DenyCIDRs []string `json:"deny_cidrs,omitempty"`
	// ProxyProtocol is "", "v1" or "v2" (tcp only): the edge prepends a PROXY
	// protocol header to each forwarded connection.
	ProxyProtocol string `json:"proxy_protocol,omitempty"`
	// AccessPolicy names an access policy of the session's owner that
	// guards the address (docs/access.md); only the address's owner may
	// name one. A reserved domain's own policy wins over it.
	AccessPolicy string `json:"access_policy,omitempty"`
	// Features lists what the agent speaks beyond this protocol's first
	// version (FeatureHTTPFrames); an edge uses only what both know, so
	// an agent that sends none is served as before.
	Features []string `json:"features,omitempty"`
}

// FeatureHTTPFrames: the agent serves the channels whose ForwardInfo says
// Framed with package internal/streamframe's frames, one HTTP exchange
// after another, instead of HTTP/1.1. The edge sends the streams of its
// HTTP/2 connections so.
const FeatureHTTPFrames = "http-frames"

// BindReply tells the agent where it is published.
type BindReply struct {
	// URL is the public address: http(s)://host[:port] or tcp://host:port.
	URL string `json:"url"`
	// SessionID identifies this session on the edge (stable for its life).
	SessionID string `json:"session_id"`
	// Nodes lists the live, not draining, nodes of a cluster of edges, this
	// one included; nil from a single edge. Later changes come as
	// NodesRequestType. (A pointer keeps the reply comparable.)
	Nodes *NodeList `json:"nodes,omitempty"`
	// StreamCert is the hex SHA-256 of the certificate that the edge's
	// stream connections present; empty when the edge sends no streams.
	StreamCert string `json:"stream_cert_sha256,omitempty"`
}

// StreamOpen asks the agent to dial a stream connection for one public
// connection.
type StreamOpen struct {
	// Token is what the agent writes first on the stream connection.
	Token string `json:"token"`
	// Info describes the public connection, as a channel's extra data does.
	Info ForwardInfo `json:"info"`
}

// StreamFailed tells the edge that the agent could not dial Token's
// stream, so it opens a channel at once instead of waiting.
type StreamFailed struct {
	Token string `json:"token"`
	Error string `json:"error"`
}

// Node is one edge node an agent should hold a session to.
type Node struct {
	// SSHAddr is the node's advertised SSH address, host:port.
	SSHAddr string `json:"ssh_addr"`
	// ID names the node's run (its name and start time): a node that
	// restarts at the same address comes back with another ID.
	ID string `json:"id"`
}

// NodeList is the payload of NodesRequestType. Version orders one node's
// lists: a list with a lower version than one seen on the same session is
// stale.
type NodeList struct {
	Nodes   []Node `json:"nodes"`
	Version uint64 `json:"version"`
}

// ErrorReply is the payload of a refused request.
type ErrorReply struct {
	// Code is a stable machine-readable reason, one of the Code* constants.
	Code  string `json:"code"`
	Error string `json:"error"`
	// Owner names the address's owner with CodeAddressOwned.
	Owner string `json:"owner,omitempty"`
}

// Stable refusal codes carried by ErrorReply and Terminate. The codes the
// control API answers too are its codes (apiwire): one name for one
// refusal, whichever way it reaches a client.
const (
	CodeAddressTaken    = "address_taken"
	CodeAddressNotFound = "address_not_found"
	// CodeAddressOwned: another owner holds the address (a reservation it
	// has not shared, or its claim on a bare subdomain).
	CodeAddressOwned     = apiwire.CodeAddressOwned
	CodeForbidden        = apiwire.CodeForbidden
	CodeInvalidRequest   = apiwire.CodeInvalidRequest
	CodeKeyRevoked       = "key_revoked"
	CodeEdgeShuttingDown = "edge_shutting_down"
	CodeSessionReplaced  = "session_replaced"
	// CodeLimitExceeded refuses what would pass one of the edge's limits;
	// the message names the limit and its value. Retrying later may work.
	CodeLimitExceeded = "limit_exceeded"
	// CodeKeyExpired: the key's expiry passed without a renewal.
	CodeKeyExpired = apiwire.CodeKeyExpired
	// CodeStateUnavailable refuses a login or a bind while the edge cannot
	// reach its state store (a cluster's etcd without quorum, or too slow
	// to answer): retry shortly.
	CodeStateUnavailable = apiwire.CodeStateUnavailable
)

// ForwardInfo describes the public connection a channel carries.
type ForwardInfo struct {
	// RemoteAddr is the public client's address, host:port.
	RemoteAddr string `json:"remote_addr"`
	// Host is the public host the client asked for (http).
	Host string `json:"host,omitempty"`
	// Scheme is "http" or "https": what the public client spoke (http).
	Scheme string `json:"scheme,omitempty"`
	// Framed: the channel carries frames (FeatureHTTPFrames), not
	// HTTP/1.1. The edge sets it only on a session whose bind named the
	// feature.
	Framed bool `json:"framed,omitempty"`
}

// Terminate tells the agent why the edge ends its session.
type Terminate struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Marshal encodes a protocol message; these types cannot fail to encode.
func Marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("protocol: " + err.Error())
	}
	return b
}
