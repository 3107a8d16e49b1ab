package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group of the operator's resources.
const Group = "k8s.tuna.am"

// Kind is one of the operator's resource kinds.
type Kind struct {
	Kind     string
	Resource string
}

// GVR of the kind at version v1alpha1.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: k.Resource}
}

// CRDName is the kind's CRD, e.g. tunnels.k8s.tuna.am.
func (k Kind) CRDName() string { return k.Resource + "." + Group }

// The operator's kinds in the uninstall order of R28: tunnels first (they
// use domains and TCP endpoints), with SecretSyncs (they use nothing), then
// domains, then TCP endpoints, then the access policies that guarded them
// (deleting a policy first would only close its addresses).
var (
	Tunnels        = Kind{Kind: "Tunnel", Resource: "tunnels"}
	Domains        = Kind{Kind: "Domain", Resource: "domains"}
	TCPEndpoints   = Kind{Kind: "TCPEndpoint", Resource: "tcpendpoints"}
	SecretSyncs    = Kind{Kind: "SecretSync", Resource: "secretsyncs"}
	AccessPolicies = Kind{Kind: "AccessPolicy", Resource: "accesspolicies"}
	Kinds          = []Kind{Tunnels, Domains, TCPEndpoints, SecretSyncs, AccessPolicies}
)

// CRDNames are the operator's CRDs.
func CRDNames() []string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.CRDName())
	}
	return out
}

// List returns the objects of one kind in a namespace ("" for all), sorted
// by namespace and name. A kind whose CRD is not installed has none.
func (c *Cluster) List(ctx context.Context, k Kind, namespace string) ([]unstructured.Unstructured, bool, error) {
	l, err := c.Dynamic.Resource(k.GVR()).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || IsNotServed(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("listing %s: %w", k.Resource, err)
	}
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	return items, true, nil
}

// StuckError is returned when objects still exist when the deadline passes.
type StuckError struct {
	Remaining []string
	Timeout   time.Duration
}

func (e *StuckError) Error() string {
	return fmt.Sprintf("after %s these resources still wait for their finalizers: %s", e.Timeout, strings.Join(e.Remaining, "; "))
}

// DeleteAll deletes every Tunnel and SecretSync, then every Domain and
// TCPEndpoint, in all namespaces, and waits until they are gone: the
// operator's finalizers revoke keys, release reservations on the edge
// (R28) and apply each SecretSync's deletionPolicy to its Secret. Progress goes to
// progress whenever what remains changes, and every 5 seconds.
func (c *Cluster) DeleteAll(ctx context.Context, timeout time.Duration, progress io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	total := 0
	for _, stage := range [][]Kind{{Tunnels, SecretSyncs}, {Domains, TCPEndpoints}, {AccessPolicies}} {
		n, err := c.deleteStage(ctx, stage, progress)
		total += n
		if err != nil {
			var stuck *StuckError
			if errors.As(err, &stuck) {
				stuck.Timeout = timeout
			}
			return total, err
		}
	}
	return total, nil
}

func (c *Cluster) deleteStage(ctx context.Context, kinds []Kind, progress io.Writer) (int, error) {
	deleted := 0
	for _, k := range kinds {
		items, _, err := c.List(ctx, k, "")
		if err != nil {
			return deleted, err
		}
		for _, it := range items {
			err := c.Dynamic.Resource(k.GVR()).Namespace(it.GetNamespace()).Delete(ctx, it.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("deleting %s %s/%s: %w", k.Kind, it.GetNamespace(), it.GetName(), err)
			}
			deleted++
			fmt.Fprintf(progress, "deleting %s %s/%s\n", k.Kind, it.GetNamespace(), it.GetName())
		}
	}
	last, lastAt := "", time.Time{}
	var prev []string
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var remaining []string
		for _, k := range kinds {
			items, _, err := c.List(ctx, k, "")
			if err != nil {
				if ctx.Err() != nil {
					return deleted, &StuckError{Remaining: prev}
				}
				return deleted, err
			}
			for _, it := range items {
				remaining = append(remaining, fmt.Sprintf("%s %s/%s (finalizers: %s)", k.Kind, it.GetNamespace(), it.GetName(), strings.Join(it.GetFinalizers(), ", ")))
			}
		}
		if len(remaining) == 0 {
			return deleted, nil
		}
		prev = remaining
		now := strings.Join(remaining, "; ")
		if now != last || time.Since(lastAt) >= 5*time.Second {
			fmt.Fprintf(progress, "waiting for %d %s to finish their finalizers: %s\n", len(remaining), plural(len(remaining), "resource"), now)
			last, lastAt = now, time.Now()
		}
		select {
		case <-ctx.Done():
			return deleted, &StuckError{Remaining: remaining}
		case <-tick.C:
		}
	}
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// Status is one resource's address and health.
type Status struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Address is a Tunnel's status.url, a Domain's status.fqdn, a
	// TCPEndpoint's status.address, a SecretSync's Secret (status.target),
	// a LoadBalancer Service's hosts with their ports.
	Address string `json:"address"`
	// Ready is the Ready condition's status: "True", "False" or "Unknown"
	// (also when there is no condition yet).
	Ready   string `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Deleting is set while the resource waits for its finalizers.
	Deleting bool   `json:"deleting,omitempty"`
	Age      string `json:"age"`
}

// StatusOf lists the operator's resources in a namespace ("" for all),
// the LoadBalancer Services it publishes there, and its Gateways and the
// HTTPRoutes and TCPRoutes attached to them.
// installed is false when none of the CRDs is installed.
func (c *Cluster) StatusOf(ctx context.Context, namespace string) (out []Status, installed bool, err error) {
	for _, k := range Kinds {
		items, ok, err := c.List(ctx, k, namespace)
		if err != nil {
			return out, true, err
		}
		installed = installed || ok
		for _, it := range items {
			out = append(out, statusOf(k, &it))
		}
	}
	lbs, err := c.LoadBalancers(ctx, namespace)
	if err != nil {
		return out, installed, err
	}
	for i := range lbs {
		out = append(out, loadBalancerStatus(&lbs[i]))
	}
	gws, err := c.GatewayStatuses(ctx, namespace)
	if err != nil {
		return out, installed, err
	}
	return append(out, gws...), installed, nil
}

func statusOf(k Kind, u *unstructured.Unstructured) Status {
	s := Status{Kind: k.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Ready: "Unknown"}
	switch k {
	case Tunnels:
		s.Address, _, _ = unstructured.NestedString(u.Object, "status", "url")
	case Domains:
		s.Address, _, _ = unstructured.NestedString(u.Object, "status", "fqdn")
	case TCPEndpoints:
		s.Address, _, _ = unstructured.NestedString(u.Object, "status", "address")
	case SecretSyncs:
		if t, _, _ := unstructured.NestedString(u.Object, "status", "target"); t != "" {
			s.Address = "secret/" + t
		}
	case AccessPolicies:
		s.Address = guarded(u)
	}
	cond := "Ready"
	if k == AccessPolicies {
		cond = "Accepted" // an AccessPolicy is ready when the edge has it in force
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == cond {
			s.Ready, _ = m["status"].(string)
			s.Reason, _ = m["reason"].(string)
			s.Message, _ = m["message"].(string)
		}
	}
	s.Deleting = u.GetDeletionTimestamp() != nil
	s.Age = age(u.GetCreationTimestamp().Time)
	return s
}

// guarded lists the addresses an AccessPolicy's status says it guards,
// "-" for none.
func guarded(u *unstructured.Unstructured) string {
	addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	var out []string
	for _, a := range addrs {
		m, _ := a.(map[string]any)
		if v, _ := m["address"].(string); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func age(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
