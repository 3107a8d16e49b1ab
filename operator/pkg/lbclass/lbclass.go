// Package lbclass says which LoadBalancer Services are the operator's: the
// class rule (Serves), the Services it has published and must clean up
// (Published), the standard cleanup finalizer, and the prefix of the
// errors it writes in a port's status. The controller and the CLI share
// it; it holds no reconciler, so the CLI links none.
package lbclass

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Finalizer is the standard finalizer of load balancer controllers: the
// Service goes only once its Tunnels and TCPEndpoints are gone, so its
// keys are revoked and its ports released (per their reclaim policy).
const Finalizer = "service.kubernetes.io/load-balancer-cleanup"

// ErrorPrefix qualifies the reasons in ports[].error, as Kubernetes asks of
// provider-specific values.
const ErrorPrefix = "k8s.tuna.am/"

// Serves reports whether the operator publishes svc: type LoadBalancer and
// class tuna (either spelling), or no class when classless is set.
func Serves(svc *corev1.Service, classless bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return classless
	}
	c := *svc.Spec.LoadBalancerClass
	return c == tunav1.LoadBalancerClass || c == tunav1.LoadBalancerClassShort
}

// Published reports whether the operator publishes svc: it carries the
// cleanup finalizer, and it is the operator's (see Ours).
func Published(svc *corev1.Service) bool {
	return controllerutil.ContainsFinalizer(svc, Finalizer) && Ours(svc)
}

// Ours reports whether the operator published svc: its class is tuna, or
// the operator's field manager wrote to it (its finalizer or status). The
// cleanup finalizer is the standard one, which other load balancer
// controllers put on their own Services: those are left alone.
func Ours(svc *corev1.Service) bool {
	if c := svc.Spec.LoadBalancerClass; c != nil && (*c == tunav1.LoadBalancerClass || *c == tunav1.LoadBalancerClassShort) {
		return true
	}
	return slices.ContainsFunc(svc.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == status.ControllerFieldOwner })
}

// Class is the loadBalancerClass to write (tunav1.LoadBalancerClass).
const Class = tunav1.LoadBalancerClass
