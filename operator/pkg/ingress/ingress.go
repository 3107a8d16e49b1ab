// Package ingress is what the controller and the agent agree on about
// Ingresses: which ones the operator serves (IngressClass of controller
// k8s.tuna.am/ingress-controller, or no class while such a class is the
// default), which rule hosts can be published, and how several Ingresses
// for one host merge into one route list. It holds no reconciler and does
// no I/O beyond reading the cache.
package ingress

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/scope"
)

const (
	// ControllerName is the spec.controller of the operator's IngressClasses.
	ControllerName = "k8s.tuna.am/ingress-controller"
	// ClassName is the name of the IngressClass the chart creates.
	ClassName = "tuna"
	// AnnotationLegacyClass is the class annotation that predates
	// spec.ingressClassName; charts still set it.
	AnnotationLegacyClass = "kubernetes.io/ingress.class"
)

// Classes are the IngressClasses of this controller.
type Classes struct {
	names     map[string]bool
	isDefault bool
}

// NewClasses picks this controller's classes out of all IngressClasses.
func NewClasses(all []networkingv1.IngressClass) Classes {
	c := Classes{names: map[string]bool{}}
	for _, ic := range all {
		if ic.Spec.Controller != ControllerName || !ic.DeletionTimestamp.IsZero() {
			continue
		}
		c.names[ic.Name] = true
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			c.isDefault = true
		}
	}
	return c
}

// Named reports whether name is one of this controller's classes.
func (c Classes) Named(name string) bool { return c.names[name] }

// Serves reports whether the operator serves ing: its class is one of
// ours, or it has no class and one of ours is the default. An Ingress being
// deleted is not served.
func (c Classes) Serves(ing *networkingv1.Ingress) bool {
	if !ing.DeletionTimestamp.IsZero() {
		return false
	}
	return c.Claims(ing)
}

// Claims is Serves without the deletion check: whether ing belongs to this
// controller at all.
func (c Classes) Claims(ing *networkingv1.Ingress) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		return c.names[*n]
	}
	if n, ok := ing.Annotations[AnnotationLegacyClass]; ok {
		return c.names[n]
	}
	return c.isDefault
}

// MayClaim reports whether ing could be served by a class named class,
// whatever the classes look like now: it names that class, or none. It
// decides which Ingresses a change of that IngressClass concerns.
func MayClaim(ing *networkingv1.Ingress, class string) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		return *n == class
	}
	if n, ok := ing.Annotations[AnnotationLegacyClass]; ok {
		return n == class
	}
	return true
}

// Served lists the IngressClasses and the Ingresses of namespaces (none:
// all namespaces) from reader and returns this controller's classes and
// the Ingresses it serves. A component limited to some namespaces passes
// them: it may not list Ingresses cluster-wide.
func Served(ctx context.Context, reader client.Reader, namespaces ...string) (Classes, []*networkingv1.Ingress, error) {
	var classes networkingv1.IngressClassList
	if err := reader.List(ctx, &classes); err != nil {
		return Classes{}, nil, fmt.Errorf("listing IngressClasses: %w", err)
	}
	c := NewClasses(classes.Items)
	var list networkingv1.IngressList
	if err := scope.List(ctx, reader, &list, namespaces); err != nil {
		return c, nil, err
	}
	var out []*networkingv1.Ingress
	for i := range list.Items {
		if c.Serves(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	SortOldestFirst(out)
	return c, out, nil
}

// HostIndex is the cache index of Ingresses by the hosts of their rules.
const HostIndex = "k8s.tuna.am/ingress-host"

// IndexHosts is the index function of HostIndex.
func IndexHosts(o client.Object) []string {
	if ing, ok := o.(*networkingv1.Ingress); ok {
		return Hosts(ing)
	}
	return nil
}

// ServedFor returns the served Ingresses with a rule for host, oldest
// first, through the cache's HostIndex.
func ServedFor(ctx context.Context, reader client.Reader, host string) ([]*networkingv1.Ingress, error) {
	var classes networkingv1.IngressClassList
	if err := reader.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing IngressClasses: %w", err)
	}
	c := NewClasses(classes.Items)
	var list networkingv1.IngressList
	if err := reader.List(ctx, &list, client.MatchingFields{HostIndex: host}); err != nil {
		return nil, fmt.Errorf("listing the Ingresses of host %s: %w", host, err)
	}
	var out []*networkingv1.Ingress
	for i := range list.Items {
		if c.Serves(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	SortOldestFirst(out)
	return out, nil
}

// ServedHosts is the set of hosts that served Ingresses of namespaces
// (none: all) publish.
func ServedHosts(ctx context.Context, reader client.Reader, namespaces ...string) (map[string]bool, error) {
	_, ings, err := Served(ctx, reader, namespaces...)
	if err != nil {
		return nil, err
	}
	hosts := map[string]bool{}
	for _, ing := range ings {
		for _, h := range Hosts(ing) {
			hosts[h] = true
		}
	}
	return hosts, nil
}

// WithHost returns the Ingresses of ings with a rule for host, keeping
// their order.
func WithHost(ings []*networkingv1.Ingress, host string) []*networkingv1.Ingress {
	var out []*networkingv1.Ingress
	for _, ing := range ings {
		if slices.Contains(Hosts(ing), host) {
			out = append(out, ing)
		}
	}
	return out
}

// HostProblem says why a rule's host cannot be published, or "" when it
// can (reservation aside, which the controller checks).
func HostProblem(host string) string {
	switch {
	case host == "":
		return "the rule has no host: tuna publishes one tunnel per host, so set host to a reserved domain (kubectl get domain shows their full names)"
	case strings.HasPrefix(host, "*"):
		return fmt.Sprintf("wildcard host %s is not supported: tuna publishes one tunnel per host, so list each reserved domain as its own rule", host)
	}
	return ""
}

// Hosts returns the distinct hosts of ing's rules that can be published,
// sorted.
func Hosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	for _, r := range ing.Spec.Rules {
		if HostProblem(r.Host) == "" {
			hosts = append(hosts, strings.ToLower(r.Host))
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// Older reports whether a was created before b; ties (creation times have
// a one-second resolution) go to the smaller namespace/name.
func Older(a, b *networkingv1.Ingress) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// SortOldestFirst orders Ingresses by age, oldest first.
func SortOldestFirst(ings []*networkingv1.Ingress) {
	slices.SortStableFunc(ings, func(a, b *networkingv1.Ingress) int {
		switch {
		case Older(a, b):
			return -1
		case Older(b, a):
			return 1
		}
		return 0
	})
}
