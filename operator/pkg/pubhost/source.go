package pubhost

import (
	"context"
	"fmt"
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/scope"
)

// Index is the cache index of every source's objects by the hosts they
// publish (an index is per kind, so one name serves them all).
const Index = "k8s.tuna.am/host"

// Source is one kind of object that publishes hosts (Ingress, Gateway):
// how its lists are made and read, which of its objects the operator
// serves, and which hosts each one publishes. Its methods are the one
// implementation of listing a source's served objects.
type Source[T client.Object, L client.ObjectList] struct {
	// Kind names the objects in errors: "Ingresses", "Gateways".
	Kind string
	// NewList returns an empty list of the kind.
	NewList func() L
	// Items returns the objects of a list.
	Items func(L) []T
	// Serving reads what decides which objects are served (their classes)
	// and returns that decision; an object being deleted is not served.
	Serving func(ctx context.Context, reader client.Reader) (func(T) bool, error)
	// Hosts returns the hosts an object publishes, sorted and distinct.
	Hosts func(T) []string
}

// IndexHosts is the index function of Index for the source's kind.
func (s Source[T, L]) IndexHosts(o client.Object) []string {
	if v, ok := o.(T); ok {
		return s.Hosts(v)
	}
	return nil
}

// Served lists the served objects of namespaces (none: all namespaces),
// oldest first. A component limited to some namespaces passes them: it
// may not list cluster-wide.
func (s Source[T, L]) Served(ctx context.Context, reader client.Reader, namespaces ...string) ([]T, error) {
	serves, err := s.Serving(ctx, reader)
	if err != nil {
		return nil, err
	}
	list := s.NewList()
	if err := scope.List(ctx, reader, list, namespaces); err != nil {
		return nil, err
	}
	return s.keep(list, serves), nil
}

// ServedFor returns the served objects that publish host, oldest first,
// through the cache's Index.
func (s Source[T, L]) ServedFor(ctx context.Context, reader client.Reader, host string) ([]T, error) {
	serves, err := s.Serving(ctx, reader)
	if err != nil {
		return nil, err
	}
	list := s.NewList()
	if err := reader.List(ctx, list, client.MatchingFields{Index: host}); err != nil {
		return nil, fmt.Errorf("listing the %s of host %s: %w", s.Kind, host, err)
	}
	return s.keep(list, serves), nil
}

// ServedHosts is the set of hosts that the served objects of namespaces
// (none: all) publish.
func (s Source[T, L]) ServedHosts(ctx context.Context, reader client.Reader, namespaces ...string) (map[string]bool, error) {
	objs, err := s.Served(ctx, reader, namespaces...)
	if err != nil {
		return nil, err
	}
	hosts := map[string]bool{}
	for _, o := range objs {
		for _, h := range s.Hosts(o) {
			hosts[h] = true
		}
	}
	return hosts, nil
}

func (s Source[T, L]) keep(list L, serves func(T) bool) []T {
	return Filter(s.Items(list), serves)
}

// Filter keeps the objects of items that serves says are served, oldest
// first: what Served and ServedFor do once they have read the cache, for
// callers (and tests) that hold whole resource sets.
func Filter[T client.Object](items []T, serves func(T) bool) []T {
	var out []T
	for _, o := range items {
		if serves(o) {
			out = append(out, o)
		}
	}
	SortOldestFirst(out)
	return out
}

// HostLister is what every Source offers whatever its kind.
type HostLister interface {
	ServedHosts(ctx context.Context, reader client.Reader, namespaces ...string) (map[string]bool, error)
}

// ServedHosts is the set of hosts that the served objects of sources in
// namespaces (none: all) publish: the hosts whose keys are kept.
func ServedHosts(ctx context.Context, reader client.Reader, namespaces []string, sources ...HostLister) (map[string]bool, error) {
	hosts := map[string]bool{}
	for _, s := range sources {
		h, err := s.ServedHosts(ctx, reader, namespaces...)
		if err != nil {
			return nil, err
		}
		maps.Copy(hosts, h)
	}
	return hosts, nil
}
