package loadbalancer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Reconciler publishes LoadBalancer Services.
type Reconciler struct {
	// Client reads Services (the cache holds type LoadBalancer only),
	// Tunnels, TCPEndpoints and Domains, and writes them.
	Client client.Client
	// Reader reads a Service the cache does not hold: one whose type
	// changed away from LoadBalancer.
	Reader   client.Reader
	Recorder recorder.EventRecorder
	// Info gives the edge's base domain and TCP host, for the addresses in
	// status.loadBalancer before a port's Tunnel reports its URL.
	Info *edgeapi.InfoCache
	// Classless also serves LoadBalancer Services without a class.
	Classless bool

	notes ingress.Notes
}

// Reconcile converges one Service.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc, err := r.service(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	if svc == nil {
		// Gone (its finalizer removed by hand): what it owned goes too.
		r.notes.Forget(req.NamespacedName)
		_, err := r.deleteChildren(ctx, req.NamespacedName, "", nil)
		return reconcile.Result{}, err
	}
	if !lbclass.Serves(svc, r.Classless) || !svc.DeletionTimestamp.IsZero() {
		return r.unpublish(ctx, svc)
	}
	if err := r.patchFinalizer(ctx, svc, true); err != nil {
		return reconcile.Result{}, err
	}
	plans := Plan(svc, r.endpoints(ctx))
	if err := r.applyChildren(ctx, svc, plans); err != nil {
		return reconcile.Result{}, err
	}
	keep := map[string]bool{}
	for _, pl := range plans {
		if pl.Tunnel != nil || pl.Problem != nil && pl.Problem.Reason == ReasonInvalidAnnotation {
			// An annotation that cannot be read changes nothing: a port's
			// reservation must not go over a typo.
			keep["Tunnel/"+ChildName(svc.Name, pl.Port.Port)] = true
			keep["TCPEndpoint/"+ChildName(svc.Name, pl.Port.Port)] = pl.Endpoint != nil || pl.Problem != nil
		}
	}
	if _, err := r.deleteChildren(ctx, client.ObjectKeyFromObject(svc), svc.UID, keep); err != nil {
		return reconcile.Result{}, err
	}
	states, infoErr := r.states(ctx, svc, plans)
	if err := r.writeStatus(ctx, svc, ingressOf(states)); err != nil {
		return reconcile.Result{}, err
	}
	r.report(svc, states)
	if infoErr != nil {
		log.FromContext(ctx).Info("the edge's facts cannot be read; status.loadBalancer lists only ports whose Tunnel has an address", "error", infoErr.Error())
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// service reads the Service from the cache, or from the API server when
// the cache (filtered to type LoadBalancer) does not hold it. nil: gone.
func (r *Reconciler) service(ctx context.Context, key types.NamespacedName) (*corev1.Service, error) {
	var svc corev1.Service
	err := r.Client.Get(ctx, key, &svc)
	if apierrors.IsNotFound(err) {
		err = r.Reader.Get(ctx, key, &svc)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Service %s: %w", key, err)
	}
	return &svc, nil
}

// unpublish deletes what the Service owns, waits until its Tunnels and
// TCPEndpoints are gone (their finalizers revoke keys and release ports),
// then clears status.loadBalancer and lets the Service go.
func (r *Reconciler) unpublish(ctx context.Context, svc *corev1.Service) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(svc)
	remaining, err := r.deleteChildren(ctx, key, svc.UID, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	if remaining > 0 {
		// Their deletion wakes this Service (it owns them); the requeue
		// only covers a missed event.
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if !lbclass.Ours(svc) {
		return reconcile.Result{}, nil
	}
	if svc.DeletionTimestamp.IsZero() && len(svc.Status.LoadBalancer.Ingress) > 0 {
		if err := r.writeStatus(ctx, svc, nil); err != nil {
			return reconcile.Result{}, err
		}
	}
	if _, published := r.notes.Get(svc, "published"); published {
		why := fmt.Sprintf("the Service is no longer of type LoadBalancer with loadBalancerClass %s", tunav1.LoadBalancerClass)
		if !svc.DeletionTimestamp.IsZero() {
			why = "the Service is being deleted"
		}
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, ReasonUnpublished, "Unpublish", "%s: its Tunnels and TCPEndpoints are deleted and its ports released", why)
	}
	r.notes.Forget(key)
	return reconcile.Result{}, r.patchFinalizer(ctx, svc, false)
}

// patchFinalizer adds or removes the cleanup finalizer with a merge patch
// that fails on a conflict: the Service is the user's, so only its
// finalizers are written, never the whole object.
func (r *Reconciler) patchFinalizer(ctx context.Context, svc *corev1.Service, add bool) error {
	if controllerutil.ContainsFinalizer(svc, lbclass.Finalizer) == add {
		return nil
	}
	orig := svc.DeepCopy()
	if add {
		controllerutil.AddFinalizer(svc, lbclass.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(svc, lbclass.Finalizer)
	}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, svc, patch, client.FieldOwner(status.ControllerFieldOwner)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("updating the finalizer %s of Service %s/%s: %w", lbclass.Finalizer, svc.Namespace, svc.Name, err)
	}
	return nil
}

// endpoints looks TCPEndpoints up in the cache.
func (r *Reconciler) endpoints(ctx context.Context) Endpoints {
	return func(namespace, name string) (*tunav1.TCPEndpoint, bool) {
		var ep tunav1.TCPEndpoint
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &ep); err != nil {
			return nil, false
		}
		return &ep, true
	}
}

// applyChildren applies each port's TCPEndpoint and Tunnel with
// server-side apply. A resource of that name that the Service does not own
// is left alone, and the port gets ReasonNameTaken.
func (r *Reconciler) applyChildren(ctx context.Context, svc *corev1.Service, plans []PortPlan) error {
	for i := range plans {
		pl := &plans[i]
		if pl.Tunnel == nil {
			continue
		}
		objs := []client.Object{pl.Tunnel}
		if pl.Endpoint != nil {
			objs = []client.Object{pl.Endpoint, pl.Tunnel}
		}
		for _, obj := range objs {
			taken, err := r.taken(ctx, svc, obj)
			if err != nil {
				return err
			}
			if taken != "" {
				pl.Problem = &Problem{Reason: ReasonNameTaken, Message: fmt.Sprintf("port %s: %s", portName(pl.Port), taken)}
				pl.Tunnel, pl.Endpoint = nil, nil
				break
			}
		}
		if pl.Tunnel == nil {
			continue
		}
		for _, obj := range objs {
			if err := r.apply(ctx, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// taken says why obj's name cannot be used for the Service: an object of
// that name exists and another owner controls it.
func (r *Reconciler) taken(ctx context.Context, svc *corev1.Service, obj client.Object) (string, error) {
	have := obj.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), have)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	if owner := metav1.GetControllerOf(have); owner != nil && owner.UID == svc.UID {
		return "", nil
	}
	return fmt.Sprintf("%s %s/%s already exists and is not this Service's: rename it, or the Service", kindOf(obj), obj.GetNamespace(), obj.GetName()), nil
}

// apply server-side-applies the spec, labels and owner of obj.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(tunav1.GroupVersion.WithKind(kindOf(obj)))
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(status.ControllerFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// deleteChildren deletes the Tunnels and TCPEndpoints labelled for the
// Service key that it controls (uid; "" for a Service that is gone) or
// that an earlier Service of the same name controlled, except those in
// keep ("Kind/name"). It returns how many still exist.
func (r *Reconciler) deleteChildren(ctx context.Context, key types.NamespacedName, uid types.UID, keep map[string]bool) (int, error) {
	remaining := 0
	lists := []client.ObjectList{&tunav1.TunnelList{}, &tunav1.TCPEndpointList{}}
	for _, list := range lists {
		if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{tunav1.LabelService: key.Name}); err != nil {
			return 0, fmt.Errorf("listing what Service %s owns: %w", key, err)
		}
		var objs []client.Object
		switch l := list.(type) {
		case *tunav1.TunnelList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *tunav1.TCPEndpointList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, obj := range objs {
			owner := metav1.GetControllerOf(obj)
			if owner == nil || owner.Kind != "Service" || owner.Name != key.Name {
				continue
			}
			current := uid != "" && owner.UID == uid
			if current && keep[kindOf(obj)+"/"+obj.GetName()] {
				continue
			}
			remaining++
			if !obj.GetDeletionTimestamp().IsZero() {
				continue
			}
			if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
			}
			log.FromContext(ctx).Info("deleted", "kind", kindOf(obj), "name", obj.GetName())
		}
	}
	return remaining, nil
}

// writeStatus applies status.loadBalancer.ingress (nil clears what this
// controller wrote).
func (r *Reconciler) writeStatus(ctx context.Context, svc *corev1.Service, ing []corev1.LoadBalancerIngress) error {
	if equalIngress(svc.Status.LoadBalancer.Ingress, ing) {
		return nil
	}
	lb := map[string]any{}
	if len(ing) > 0 {
		list := make([]any, len(ing))
		for i := range ing {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ing[i])
			if err != nil {
				return err
			}
			list[i] = m
		}
		lb["ingress"] = list
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"loadBalancer": lb}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	u.SetNamespace(svc.Namespace)
	u.SetName(svc.Name)
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(status.ControllerFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying status.loadBalancer of Service %s/%s: %w", svc.Namespace, svc.Name, client.IgnoreNotFound(err))
	}
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *tunav1.TCPEndpoint:
		return "TCPEndpoint"
	case *tunav1.Tunnel:
		return "Tunnel"
	}
	return fmt.Sprintf("%T", obj)
}
