// Package fake is an in-memory stand-in for the edge control API, with
// error injection and call counts, for unit tests of reconcilers only. The
// end-to-end tests use the real edge; this fake exists to produce failures a
// real edge will not produce on demand (a 5xx on the third call, say).
package fake

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// BaseDomain is the fake edge's base domain.
const BaseDomain = "tuna.test"

// Edge is the fake. The zero value is not usable; call New.
type Edge struct {
	// TTL, when set, gives new and renewed keys an expiry, as the edge's
	// --tunnel-key-ttl does. Set it before use.
	TTL time.Duration

	mu      sync.Mutex
	now     time.Time // the fake clock; zero: the real one
	keys    map[string]apiwire.TunnelKey
	nextID  int
	calls   map[string]int
	failing map[string][]error
}

// New returns an empty fake edge.
func New() *Edge {
	return &Edge{keys: map[string]apiwire.TunnelKey{}, calls: map[string]int{}, failing: map[string][]error{}}
}

// FailNext makes the next calls of op (e.g. "RevokeTunnelKey") fail with
// errs, in order.
func (e *Edge) FailNext(op string, errs ...error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failing[op] = append(e.failing[op], errs...)
}

// Calls returns how often op was called.
func (e *Edge) Calls(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

// APIError builds an error as the real client returns it.
func APIError(status int, code string) error {
	return &apiwire.APIError{Status: status, Code: code, Message: "injected " + code, RequestID: "fake"}
}

// Now is the fake's clock: the real time until SetNow pins it.
func (e *Edge) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clock()
}

// SetNow pins the fake's clock, so a test can move a key towards its
// expiry without waiting.
func (e *Edge) SetNow(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t
}

func (e *Edge) clock() time.Time {
	if e.now.IsZero() {
		return time.Now()
	}
	return e.now
}

// expire gives k a full TTL from now, when the fake has one.
func (e *Edge) expire(k *apiwire.TunnelKey) {
	if e.TTL <= 0 {
		return
	}
	at := e.clock().Add(e.TTL)
	k.ExpiresAt, k.TTLSeconds = &at, int64(e.TTL/time.Second)
}

func (e *Edge) enter(op string) error {
	e.calls[op]++
	if errs := e.failing[op]; len(errs) > 0 {
		e.failing[op] = errs[1:]
		return errs[0]
	}
	return nil
}

// Edge implements edgeapi.TunnelKeys.
func (e *Edge) Edge(context.Context) (*apiwire.EdgeInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enter("Edge"); err != nil {
		return nil, err
	}
	return &apiwire.EdgeInfo{BaseDomain: BaseDomain, SSHAddr: "127.0.0.1:2222", SSHHostKey: "ssh-ed25519 AAAA fake"}, nil
}

// CreateTunnelKey implements edgeapi.TunnelKeys.
func (e *Edge) CreateTunnelKey(_ context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enter("CreateTunnelKey"); err != nil {
		return nil, err
	}
	e.nextID++
	addr := in.Address
	if in.Protocol == "http" && addr != "" && !strings.Contains(addr, ".") {
		addr += "." + BaseDomain // as the real edge stores a subdomain
	}
	k := apiwire.TunnelKey{ID: fmt.Sprintf("tk%d", e.nextID), Protocol: in.Protocol, Address: addr,
		Labels: in.Labels, Owner: in.Owner, CreatedAt: e.clock()}
	e.expire(&k)
	e.keys[k.ID] = k
	k.Key = "tunt_" + k.ID + "_secret"
	return &k, nil
}

// ListTunnelKeys implements edgeapi.TunnelKeys.
func (e *Edge) ListTunnelKeys(_ context.Context, labels map[string]string) ([]apiwire.TunnelKey, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enter("ListTunnelKeys"); err != nil {
		return nil, err
	}
	var out []apiwire.TunnelKey
next:
	for _, k := range e.keys {
		for lk, lv := range labels {
			if k.Labels[lk] != lv {
				continue next
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// RevokeTunnelKey implements edgeapi.TunnelKeys.
func (e *Edge) RevokeTunnelKey(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enter("RevokeTunnelKey"); err != nil {
		return err
	}
	if _, ok := e.keys[id]; !ok {
		return APIError(http.StatusNotFound, apiwire.CodeNotFound)
	}
	delete(e.keys, id)
	return nil
}

// RenewTunnelKey implements edgeapi.TunnelKeys as the edge does: a full TTL
// from now, 404 for a missing key, 409 key_expired for an expired one.
func (e *Edge) RenewTunnelKey(_ context.Context, id string) (*apiwire.TunnelKey, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enter("RenewTunnelKey"); err != nil {
		return nil, err
	}
	k, ok := e.keys[id]
	if !ok {
		return nil, APIError(http.StatusNotFound, apiwire.CodeNotFound)
	}
	if k.ExpiresAt != nil && !e.clock().Before(*k.ExpiresAt) {
		return nil, APIError(http.StatusConflict, apiwire.CodeKeyExpired)
	}
	e.expire(&k)
	e.keys[id] = k
	return &k, nil
}

// Key returns a stored key.
func (e *Edge) Key(id string) (apiwire.TunnelKey, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k, ok := e.keys[id]
	return k, ok
}

// Has reports whether a key exists.
func (e *Edge) Has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.keys[id]
	return ok
}

// AddKey stores a key as if issued earlier, and returns its id.
func (e *Edge) AddKey(labels map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextID++
	id := fmt.Sprintf("tk%d", e.nextID)
	e.keys[id] = apiwire.TunnelKey{ID: id, Protocol: "http", Labels: labels}
	return id
}
