// Package ingress is what the controller and the agent agree on about
// Ingresses: which ones the operator serves (IngressClass of controller
// k8s.tuna.am/ingress-controller, or no class while such a class is the
// default), which rule hosts can be published, and how several Ingresses
// for one host merge into one route list; what is the same for every source
// of a published host is operator/pkg/pubhost's. It holds no reconciler and
// does no I/O beyond reading the cache.
package ingress

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
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

// Source is the Ingress source of published hosts: the Ingresses this
// controller's classes serve, and the hosts of their rules (Hosts).
var Source = pubhost.Source[*networkingv1.Ingress, *networkingv1.IngressList]{
	Kind:    "Ingresses",
	NewList: func() *networkingv1.IngressList { return &networkingv1.IngressList{} },
	Items: func(l *networkingv1.IngressList) []*networkingv1.Ingress {
		out := make([]*networkingv1.Ingress, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	},
	Serving: func(ctx context.Context, reader client.Reader) (func(*networkingv1.Ingress) bool, error) {
		c, err := ReadClasses(ctx, reader)
		return c.Serves, err
	},
	Hosts: Hosts,
}

// ReadClasses lists the IngressClasses and picks this controller's.
func ReadClasses(ctx context.Context, reader client.Reader) (Classes, error) {
	var classes networkingv1.IngressClassList
	if err := reader.List(ctx, &classes); err != nil {
		return Classes{}, fmt.Errorf("listing IngressClasses: %w", err)
	}
	return NewClasses(classes.Items), nil
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
