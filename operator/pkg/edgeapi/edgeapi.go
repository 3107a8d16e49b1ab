// Package edgeapi is the operator's view of the tuna-edge control API: a
// small interface (so reconcilers can be unit-tested against a fake) and the
// one mapping of API errors to requeue rules and conditions (failure.go).
package edgeapi

import (
	"context"

	"code.tuna.am/tuna/k8s-operator/edge/client"
)

// TunnelKeys is what the controller needs to manage per-tunnel keys.
type TunnelKeys interface {
	Edge(ctx context.Context) (*client.EdgeInfo, error)
	CreateTunnelKey(ctx context.Context, in client.CreateTunnelKey) (*client.TunnelKey, error)
	ListTunnelKeys(ctx context.Context, labels map[string]string) ([]client.TunnelKey, error)
	RevokeTunnelKey(ctx context.Context, id string) error
	// RenewTunnelKey extends a key's expiry by the edge's TTL.
	RenewTunnelKey(ctx context.Context, id string) (*client.TunnelKey, error)
}

// Reservations is what the Domain and TCPEndpoint reconcilers need.
type Reservations interface {
	CreateDomain(ctx context.Context, in client.CreateDomain) (*client.Domain, error)
	GetDomain(ctx context.Context, name string) (*client.Domain, error)
	VerifyDomain(ctx context.Context, name string) (*client.Domain, error)
	DeleteDomain(ctx context.Context, name string) error
	CreateTCPEndpoint(ctx context.Context, in client.CreateTCPEndpoint) (*client.TCPEndpoint, error)
	GetTCPEndpoint(ctx context.Context, alias string) (*client.TCPEndpoint, error)
	DeleteTCPEndpoint(ctx context.Context, alias string) error
}

// API is the whole surface the operator uses.
type API interface {
	TunnelKeys
	Reservations
	WhoAmI(ctx context.Context) (*client.WhoAmI, error)
}

var _ API = (*client.Client)(nil)

// Labels the operator puts on every tunnel key it issues, so it can find the
// keys of one resource and never touch another cluster's keys.
const (
	LabelCluster   = "k8s.tuna.am/cluster"
	LabelKind      = "k8s.tuna.am/kind"
	LabelNamespace = "k8s.tuna.am/namespace"
	LabelName      = "k8s.tuna.am/name"
	LabelUID       = "k8s.tuna.am/uid"
	// LabelHost names the Ingress host a key serves (kind Ingress): one key
	// per host, shared by every Ingress with a rule for that host, so such
	// keys carry no namespace, name or UID.
	LabelHost = "k8s.tuna.am/host"
)

// Code is the API error code of err, or "".
func Code(err error) string { return client.CodeOf(err) }
