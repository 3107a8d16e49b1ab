package accesspolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Edge is what the reconciler needs of the edge's API.
type Edge interface {
	PutAccessPolicy(ctx context.Context, p apiwire.AccessPolicy) (*apiwire.AccessPolicy, error)
	DeleteAccessPolicy(ctx context.Context, owner, name string) error
}

// DefaultResync is how often a policy is looked at again without a
// change of its own: a changed Secret is picked up within it (the
// controller reads Secrets with get, never watches them).
const DefaultResync = 30 * time.Second

// Reconciler keeps AccessPolicies on the edge.
type Reconciler struct {
	Client client.Client
	// Reader reads the Secrets the policies name (get only, uncached).
	Reader    client.Reader
	Edge      Edge
	Recorder  recorder.EventRecorder
	ClusterID string
	// Namespace is the operator's: it holds the hosts' key Secrets, which
	// name each Ingress or Gateway host's owner namespace.
	Namespace string
	// Services: LoadBalancer Services are cached (loadBalancer.enabled),
	// so those that attach a policy by annotation are listed.
	Services bool
	Resync   time.Duration

	// told remembers, per user, the last event recorded on it, so that
	// each change is told once.
	told sync.Map
	ctl  controller.Controller
}

// wake maps an object that names a policy of its namespace to the policy's
// request; on an update, both the old and the new object are mapped, so a
// policy an object stops naming is woken too.
func wake(name func(client.Object) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if n := name(o); n != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: n}}}
		}
		return nil
	})
}

// SetupWithManager registers the reconciler; a Tunnel, Domain or Ingress
// that names a policy wakes it (HTTPRoutes from ServeGateways on).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctl, err := ctrl.NewControllerManagedBy(mgr).Named("accesspolicy").For(&tunav1.AccessPolicy{}).
		Watches(&tunav1.Tunnel{}, wake(func(o client.Object) string {
			if ref := o.(*tunav1.Tunnel).Spec.AccessPolicyRef; ref != nil {
				return ref.Name
			}
			return ""
		})).
		Watches(&tunav1.Domain{}, handler.EnqueueRequestsFromMapFunc(r.namespacePolicies)).
		Watches(&networkingv1.Ingress{}, wake(func(o client.Object) string { return o.GetAnnotations()[tunav1.AnnotationAccessPolicy] })).
		Build(&base.Reconciler[*tunav1.AccessPolicy]{
			Client: r.Client, New: func() *tunav1.AccessPolicy { return &tunav1.AccessPolicy{} },
			Finalizer: tunav1.FinalizerAccessPolicy, Finalize: r.finalize, Converge: r.converge,
		})
	r.ctl = ctl
	return err
}

// ServeGateways wakes a policy when an HTTPRoute of its namespace starts
// or stops naming it in an ExtensionRef filter, so its status lists the
// route's hosts at once rather than at the next resync. Call it once,
// after SetupWithManager, when the API server serves the Gateway API.
func (r *Reconciler) ServeGateways(mgr ctrl.Manager) error {
	src := source.Kind(mgr.GetCache(), client.Object(&gwv1.HTTPRoute{}), wake(func(o client.Object) string {
		return gateway.AccessPolicyOf(o.(*gwv1.HTTPRoute))
	}))
	if err := r.ctl.Watch(src); err != nil {
		return fmt.Errorf("watching HTTPRoutes for AccessPolicies: %w", err)
	}
	return nil
}

// namespacePolicies wakes every policy of a Domain's namespace: the
// policy the Domain attaches, and those its policy overrides on its host.
func (r *Reconciler) namespacePolicies(ctx context.Context, o client.Object) []reconcile.Request {
	var list tunav1.AccessPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ownerWait is how soon a policy is looked at again while a host it is
// attached to has no key Secret yet (which names the host's owner).
const ownerWait = 2 * time.Second

func (r *Reconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

// converge writes the policy to the edge when it changed, and its status.
func (r *Reconciler) converge(ctx context.Context, p *tunav1.AccessPolicy) (reconcile.Result, error) {
	users, err := r.users(ctx, p)
	if err != nil {
		return reconcile.Result{}, err
	}
	owner := edgeapi.Owner(r.ClusterID, p.Namespace)
	in, err := Build(ctx, r.Reader, p, owner)
	var se *SecretError
	switch {
	case errors.As(err, &se):
		return r.report(ctx, p, users, metav1.ConditionFalse, tunav1.ReasonSecretNotFound, se.Msg, "", reconcile.Result{RequeueAfter: r.resync()})
	case err != nil:
		return reconcile.Result{}, err
	}
	digest := apiwire.PolicyDigest(in)
	if digest != p.Status.Digest || !edgeHas(p) {
		out, err := r.Edge.PutAccessPolicy(ctx, in)
		if err != nil {
			f := edgeapi.Classify(err, tunav1.ReasonInvalidPolicy)
			if f.Transient {
				res, err := f.Result()
				_, werr := r.report(ctx, p, users, metav1.ConditionUnknown, f.Reason, f.Message, p.Status.Digest, res)
				return res, errors.Join(err, werr)
			}
			return r.report(ctx, p, users, metav1.ConditionFalse, f.Reason, edgeapi.Message(err), "", reconcile.Result{RequeueAfter: r.resync()})
		}
		digest = out.Digest
	}
	res := reconcile.Result{RequeueAfter: r.resync()}
	var inForce, tcp, refused []string
	for _, u := range users {
		if u.pending {
			res.RequeueAfter = min(res.RequeueAfter, ownerWait)
		}
		switch {
		case u.refusal != "":
			refused = append(refused, u.kind+" "+u.obj.GetName()+": "+u.refusal)
		case u.tcp && !p.Spec.IPOnly():
			tcp = append(tcp, u.kind+" "+u.obj.GetName())
		default:
			inForce = append(inForce, u.kind+" "+u.obj.GetName())
		}
	}
	if len(tcp) > 0 {
		return r.report(ctx, p, users, metav1.ConditionFalse, tunav1.ReasonTCPNeedsIPRules,
			fmt.Sprintf("%s publish a TCP address, which takes only ip rules without pathPrefixes or methods: the edge refuses "+
				"their connections; give them a policy of ip rules", strings.Join(tcp, ", ")), digest, res)
	}
	if len(inForce) == 0 && len(refused) > 0 {
		return r.report(ctx, p, users, metav1.ConditionFalse, tunav1.ReasonAttachmentRefused,
			"the edge has the policy, but it guards nothing: "+strings.Join(refused, "; "), digest, res)
	}
	msg := "the edge enforces the policy"
	if len(users) == 0 {
		msg += "; nothing attaches it yet (spec.accessPolicyRef of a Tunnel or Domain, the annotation " +
			tunav1.AnnotationAccessPolicy + " of an Ingress or LoadBalancer Service, or an ExtensionRef filter of an HTTPRoute)"
	}
	if len(refused) > 0 {
		msg += "; not in force for " + strings.Join(refused, "; ")
	}
	return r.report(ctx, p, users, metav1.ConditionTrue, tunav1.ReasonAccepted, msg, digest, res)
}

// edgeHas reports whether the status says the edge took this generation
// of the policy (whatever becomes of its attachments).
func edgeHas(p *tunav1.AccessPolicy) bool {
	c := status.Find(p.Status.Conditions, tunav1.ConditionAccepted)
	return c != nil && c.ObservedGeneration == p.Generation && (c.Reason == tunav1.ReasonAccepted ||
		c.Reason == tunav1.ReasonAttachmentRefused || c.Reason == tunav1.ReasonTCPNeedsIPRules)
}

// report writes the status and tells each user of a change.
func (r *Reconciler) report(ctx context.Context, p *tunav1.AccessPolicy, users []user, st metav1.ConditionStatus, reason, msg, digest string,
	res reconcile.Result) (reconcile.Result, error) {
	cond := status.Condition(p.Status.Conditions, tunav1.ConditionAccepted, st, reason, msg, p.Generation)
	addrs := make([]any, 0, len(users))
	for _, u := range users {
		if u.refusal != "" {
			continue
		}
		a := map[string]any{"kind": u.kind, "name": u.obj.GetName()}
		if u.address != "" {
			a["address"] = u.address
		}
		addrs = append(addrs, a)
	}
	err := status.Apply(ctx, r.Client, tunav1.GroupVersion.WithKind("AccessPolicy"), client.ObjectKeyFromObject(p), status.ControllerFieldOwner,
		status.Fields{Conditions: []metav1.Condition{cond}, Values: map[string]any{
			"addresses": addrs, "digest": digest, "observedGeneration": p.Generation}})
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, u := range users {
		r.tell(p, u, cond)
	}
	return res, nil
}

// tell records an event on a user once per change of what it is told.
func (r *Reconciler) tell(p *tunav1.AccessPolicy, u user, cond metav1.Condition) {
	key := string(u.obj.GetUID()) + "/" + p.Name
	now := string(cond.Status) + "/" + cond.Reason + "/" + cond.Message
	if u.refusal != "" {
		now = "refused/" + u.refusal
	}
	if prev, ok := r.told.Swap(key, now); ok && prev == now {
		return
	}
	if u.refusal != "" {
		// The agent records the refusals it decides itself on the object.
		if !u.told {
			r.Recorder.Eventf(u.obj, p, corev1.EventTypeWarning, "AccessPolicyRefused", "Protect", "%s", u.refusal)
		}
		return
	}
	if cond.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(u.obj, p, corev1.EventTypeNormal, "AccessPolicyInForce", "Protect",
			"access policy %s guards %s at the edge", p.Name, orAll(u.address))
		return
	}
	r.Recorder.Eventf(u.obj, p, corev1.EventTypeWarning, "AccessPolicyNotInForce", "Protect",
		"access policy %s is not in force (%s: %s); until it is, the edge refuses every request to %s", p.Name, cond.Reason, cond.Message, orAll(u.address))
}

func orAll(address string) string {
	if address == "" {
		return "its address"
	}
	return address
}

// finalize deletes the policy on the edge. The addresses that still name
// it then refuse every request, as a missing policy does: deleting a
// policy never opens what it guarded.
func (r *Reconciler) finalize(ctx context.Context, p *tunav1.AccessPolicy) (reconcile.Result, error) {
	err := r.Edge.DeleteAccessPolicy(ctx, edgeapi.Owner(r.ClusterID, p.Namespace), p.Name)
	if err != nil && !apiwire.IsNotFound(err) {
		return edgeapi.Classify(err, tunav1.ReasonInvalidPolicy).Result()
	}
	return reconcile.Result{}, nil
}
