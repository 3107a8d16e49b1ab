// Package hostkey is the controller's part of published hosts (the hosts
// of Ingress rules of the class tuna and of Gateway listeners,
// operator/pkg/pubhost): one ephemeral tunnel key per host, issued only
// for a host that is a reserved domain (R3), handed to the agent in a
// Secret named after the host, and revoked as soon as no served Ingress
// or Gateway publishes the host. It also reports the Ingress rules it
// cannot publish (RuleSkipped events).
//
// The key belongs to the host, not to one Ingress: several Ingresses may
// serve one host, and the oldest of them may be deleted while the host
// stays. Hence no finalizer on users' Ingresses (the controller may not
// update them, and a Helm or Argo CD managed Ingress should not wait on the
// operator): deleting the last Ingress of a host wakes the host's
// reconcile, which revokes the key; keys of hosts whose Ingresses went
// while the operator was down are revoked by the orphan collector.
package hostkey

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	reservations "code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Event reasons on Ingresses (R17). An edge API refusal has the reason
// edgeapi.Classify gives it (APIKeyInvalid, say), else EdgeRefused.
const (
	ReasonRuleSkipped = "RuleSkipped"
	ReasonEdgeRefused = "EdgeRefused"
)

// Edge is what the reconciler needs of the edge API.
type Edge interface {
	edgeapi.TunnelKeys
	GetDomain(ctx context.Context, name string) (*apiwire.Domain, error)
}

// Hooks observe key operations for metrics; nil fields are skipped.
type Hooks struct {
	Issued  func()
	Revoked func()
}

// Reconciler issues and revokes the keys of Ingress hosts.
type Reconciler struct {
	// Client reads Ingresses, IngressClasses and Domains from the cache and
	// writes (never reads) key Secrets.
	Client    client.Client
	Edge      Edge
	Info      *edgeapi.InfoCache
	Namespace string // the operator's namespace, where key Secrets live
	ClusterID string
	Recorder  recorder.EventRecorder
	Hooks     Hooks
	// Resync re-checks each served host this often: a reservation made or
	// deleted by hand on the edge, a key revoked by hand (default 1 minute).
	// A key is also looked at when it is due for renewal, if that is sooner.
	Resync time.Duration
	// Now is the clock that decides renewals (default time.Now).
	Now func() time.Time

	// ctl is the running controller, which ServeGateways gives more
	// watches; gateways publishes the hosts of the operator's Gateways'
	// listeners too, with the same keys, once the Gateway API is installed.
	ctl      controller.Controller
	gateways atomic.Bool

	// handedOver remembers, per host, the key whose Secret this process
	// wrote. The controller never reads Secrets, so after a restart it
	// trusts a key only when a live session proves the agent holds it;
	// otherwise it issues a fresh one (no tunnel runs on it anyway).
	handedOver sync.Map // host -> key ID
	notes      ingress.Notes
}

// Reconcile converges one host's key, or checks one Ingress's rules.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if pubhost.IsRequest(req) {
		return r.reconcileHost(ctx, req.Name)
	}
	return reconcile.Result{}, r.checkRules(ctx, req)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// resync is the period of the host's next check, jittered (edgeapi.Jitter).
func (r *Reconciler) resync() time.Duration {
	if r.Resync <= 0 {
		return edgeapi.Jitter(time.Minute)
	}
	return edgeapi.Jitter(r.Resync)
}

// checkRules reports the rules of one Ingress that cannot be published at
// all: no host, a wildcard host, or only a defaultBackend.
func (r *Reconciler) checkRules(ctx context.Context, req reconcile.Request) error {
	var ing networkingv1.Ingress
	if err := r.Client.Get(ctx, req.NamespacedName, &ing); err != nil {
		if apierrors.IsNotFound(err) {
			r.notes.Forget(req.NamespacedName)
		}
		return client.IgnoreNotFound(err)
	}
	var classes networkingv1.IngressClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return fmt.Errorf("listing IngressClasses: %w", err)
	}
	if !ingress.NewClasses(classes.Items).Serves(&ing) {
		r.notes.Forget(req.NamespacedName)
		return nil
	}
	keep := map[string]bool{}
	for i, rule := range ing.Spec.Rules {
		if problem := ingress.HostProblem(rule.Host); problem != "" {
			subject := fmt.Sprintf("rule/%d", i)
			keep[subject] = true
			r.skip(&ing, subject, fmt.Sprintf("rule %d skipped: %s", i+1, problem))
		}
	}
	if len(ingress.Hosts(&ing)) == 0 && ing.Spec.DefaultBackend != nil {
		keep["default"] = true
		r.skip(&ing, "default", "the defaultBackend is not published: tuna publishes hosts, and this Ingress has no rule with a host; add a rule whose host is a reserved domain")
	}
	r.notes.Prune(&ing, "rule/", keep)
	r.notes.Prune(&ing, "default", keep)
	return nil
}

// skip records a RuleSkipped event once per change of its message.
func (r *Reconciler) skip(ing *networkingv1.Ingress, subject, msg string) {
	r.warn(ing, subject, ReasonRuleSkipped, msg)
}

// warn records a Warning event once per change of its message.
func (r *Reconciler) warn(ing *networkingv1.Ingress, subject, reason, msg string) {
	if r.notes.Set(ing, subject, msg) {
		r.Recorder.Eventf(ing, nil, corev1.EventTypeWarning, reason, ingress.Action("Publish", subject, msg), "%s", msg)
	}
}

// reconcileHost keeps exactly one key for a host that served Ingresses
// publish and that is a reserved domain, and none otherwise.
func (r *Reconciler) reconcileHost(ctx context.Context, host string) (reconcile.Result, error) {
	ings, err := ingress.Source.ServedFor(ctx, r.Client, host)
	if err != nil {
		return reconcile.Result{}, err
	}
	namespaces, err := r.publishers(ctx, host, ings)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(namespaces) == 0 {
		return reconcile.Result{}, r.release(ctx, host)
	}
	subject := "host/" + host
	res, err := r.reservation(ctx, host, namespaces)
	if err != nil {
		// The edge did not say the host is unreserved, only that it
		// cannot answer: keep the host's key, so its live tunnel keeps
		// serving (fail static), and tell the user when it refused.
		f := edgeapi.Classify(err, ReasonEdgeRefused)
		if f.Transient {
			return f.Result()
		}
		for _, ing := range ings {
			r.warn(ing, subject, f.Reason, fmt.Sprintf("cannot check that host %s is a reserved domain: %s; its tunnel is kept as it is", host, f.Message))
		}
		return reconcile.Result{RequeueAfter: r.resync()}, nil
	}
	if res.problem != "" {
		if err := r.release(ctx, host); err != nil {
			return reconcile.Result{}, err
		}
		for _, ing := range ings {
			r.skip(ing, subject, fmt.Sprintf("rules for host %s skipped: %s", host, res.problem))
		}
		return reconcile.Result{RequeueAfter: r.resync()}, nil
	}
	ten, err := r.tenancy(ctx, host, namespaces)
	if err != nil {
		// Who owns the host is unknown, not "nobody may serve it": keep
		// the host's key as it is (fail static).
		f := edgeapi.Classify(err, ReasonEdgeRefused)
		if f.Transient {
			return f.Result()
		}
		for _, ing := range ings {
			r.warn(ing, subject, f.Reason, fmt.Sprintf("cannot read who owns host %s: %s; its tunnel is kept as it is", host, f.Message))
		}
		return reconcile.Result{RequeueAfter: r.resync()}, nil
	}
	for _, ing := range ings {
		if msg := ten.refused[ing.Namespace]; msg != "" {
			r.warn(ing, subject, ReasonAddressOwned, fmt.Sprintf("rules for host %s skipped: %s", host, msg))
			continue
		}
		r.notes.Clear(ing, subject)
	}
	if len(ten.allowed) == 0 {
		return reconcile.Result{RequeueAfter: r.resync()}, r.release(ctx, host)
	}
	next, err := r.ensureKey(ctx, host, res.lbHostname, ten)
	if err != nil {
		if m, ok := edgeapi.Owned(err, r.ClusterID, ten.owner); ok {
			for _, ing := range ings {
				r.warn(ing, subject, ReasonAddressOwned, fmt.Sprintf("rules for host %s skipped: %s", host, m))
			}
			return reconcile.Result{RequeueAfter: r.resync()}, nil
		}
		// ensureKey revokes nothing before it has a new key handed over,
		// and a renewal the edge could not answer keeps the key, so a
		// failure leaves the host's tunnel as it was.
		f := edgeapi.Classify(err, ReasonEdgeRefused)
		if f.Transient {
			return f.Result()
		}
		log.FromContext(ctx).Info("the edge refused a tunnel key call for an Ingress host", "host", host, "error", err.Error())
		for _, ing := range ings {
			r.warn(ing, subject, f.Reason, fmt.Sprintf("the key of host %s cannot be checked or issued: %s", host, f.Message))
		}
		return reconcile.Result{RequeueAfter: r.resync()}, nil
	}
	return reconcile.Result{RequeueAfter: edgeapi.Sooner(r.resync(), next)}, nil
}

type reservation struct {
	// problem says why the host is not a usable reserved domain; "" when
	// it is.
	problem string
	// lbHostname is what the Ingress status shows for the host.
	lbHostname string
}

// reservation checks that host is a reserved domain (R3): a Ready Domain
// of one of the Ingresses' namespaces whose status.fqdn is the host, or a
// domain reserved on the account (and verified, for a custom one). A
// wildcard "*.parent" (a Gateway listener's) is reserved with parent's
// Domain, whose holder the edge lets claim it.
func (r *Reconciler) reservation(ctx context.Context, host string, namespaces []string) (reservation, error) {
	name := host
	if parent, ok := strings.CutPrefix(host, "*."); ok {
		name = parent
	}
	for _, ns := range namespaces {
		var domains tunav1.DomainList
		if err := r.Client.List(ctx, &domains, client.InNamespace(ns)); err != nil {
			return reservation{}, fmt.Errorf("listing Domains of namespace %s: %w", ns, err)
		}
		for _, d := range domains.Items {
			ready := status.Find(d.Status.Conditions, tunav1.ConditionReady)
			// Unknown: reserved, and the edge API cannot confirm it right
			// now; the host stays published (fail static).
			if d.Status.FQDN != name || ready == nil || ready.Status == metav1.ConditionFalse {
				continue
			}
			if name != host {
				return reservation{lbHostname: host}, nil
			}
			return reservation{lbHostname: reservations.DNSTarget(host, d.Spec.Domain != "", d.Status.DNSRecords)}, nil
		}
	}
	d, err := r.Edge.GetDomain(ctx, host)
	switch {
	case apiwire.IsNotFound(err) && r.firstClaim(ctx, host):
		return reservation{lbHostname: host}, nil
	case apiwire.IsNotFound(err):
		return reservation{problem: r.notReserved(ctx, host, namespaces)}, nil
	case err != nil:
		return reservation{}, err
	case d.Custom && !d.Verified:
		return reservation{problem: fmt.Sprintf("custom domain %s is reserved but its DNS records are not verified yet: create the records `kubectl get domain -o yaml` lists (status.dnsRecords)", host)}, nil
	}
	var records []tunav1.DNSRecord
	for _, rec := range d.DNSRecords {
		records = append(records, tunav1.DNSRecord{Type: rec.Type, Name: rec.Name, Value: rec.Value})
	}
	return reservation{lbHostname: reservations.DNSTarget(host, d.Custom, records)}, nil
}

// firstClaim reports whether host, reserved by no Domain, is the first
// publisher's to claim, as the edge decides when its key is issued: one
// of the edge's Gateway addresses, or on an edge that takes any host
// (tuna-edge serve --any-host) a host outside its base domain.
func (r *Reconciler) firstClaim(ctx context.Context, host string) bool {
	info, err := r.Info.Get(ctx)
	if err != nil {
		return false
	}
	if slices.Contains(info.GatewayAddresses, host) {
		return true
	}
	if _, ok := strings.CutSuffix(host, "."+info.BaseDomain); ok {
		return false
	}
	return info.AnyHost
}

// notReserved tells the user how to reserve host.
func (r *Reconciler) notReserved(ctx context.Context, host string, namespaces []string) string {
	spec := "domain: " + host
	if info, err := r.Info.Get(ctx); err == nil {
		if label, ok := strings.CutSuffix(host, "."+info.BaseDomain); ok && !strings.Contains(label, ".") {
			spec = "subdomain: " + label
		}
	}
	return fmt.Sprintf("host %s is not a reserved domain: create a Domain with spec.%s in namespace %s (or reserve the domain on the account), then the host is published",
		host, spec, namespaces[0])
}

func (r *Reconciler) keyLabels(host string) map[string]string {
	return map[string]string{
		edgeapi.LabelCluster: r.ClusterID,
		edgeapi.LabelKind:    "Ingress",
		edgeapi.LabelHost:    host,
	}
}

// ensureKey keeps one key for host whose Secret the agent holds, renewed
// before it expires, and says when the key is next due for renewal (0:
// never). A new key's Secret is written before the old keys are revoked,
// so the agent always has a valid key to switch to.
// The key is issued for the owner namespace of the host and names, in its
// Secret, the namespaces whose Ingresses the agent may serve on it.
func (r *Reconciler) ensureKey(ctx context.Context, host, lb string, ten tenancy) (time.Duration, error) {
	keys, err := r.Edge.ListTunnelKeys(ctx, r.keyLabels(host))
	if err != nil {
		return 0, err
	}
	handed, _ := r.handedOver.Load(host)
	keep := ""
	for _, k := range keys {
		if k.Protocol != "http" || !strings.EqualFold(k.Address, host) ||
			k.Owner != edgeapi.Owner(r.ClusterID, ten.owner) || k.Labels[labelNamespaces] != ten.digest() {
			continue
		}
		if k.ID == handed {
			keep = k.ID
			break
		}
		if k.Session != nil && keep == "" {
			// A live session on it: only the agent, reading the Secret,
			// can have it.
			keep = k.ID
		}
	}
	if keep != "" {
		i := slices.IndexFunc(keys, func(k apiwire.TunnelKey) bool { return k.ID == keep })
		next, expired, err := edgeapi.KeepKey(ctx, r.Edge, &keys[i], r.now())
		if err != nil {
			return 0, err
		}
		if !expired {
			r.handedOver.Store(host, keep)
			return next, r.revoke(ctx, keys, keep)
		}
		// Renewals were missed: a new key, revoking the expired one.
		log.FromContext(ctx).Info("the Ingress host's key expired before it was renewed; issuing a new one", "host", host, "keyID", keep)
	}
	if keys, err = r.handBack(ctx, host, keys, edgeapi.Owner(r.ClusterID, ten.owner)); err != nil {
		return 0, err
	}
	labels := r.keyLabels(host)
	labels[labelNamespaces] = ten.digest()
	key, err := r.Edge.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: host, Labels: labels,
		Owner: edgeapi.Owner(r.ClusterID, ten.owner)})
	if err != nil {
		return 0, err
	}
	if r.Hooks.Issued != nil {
		r.Hooks.Issued()
	}
	info, err := r.Info.Get(ctx)
	if err != nil {
		return 0, err
	}
	secret := keysecret.ApplyHost(r.Namespace, host, keysecret.Contents{
		TunnelKey: key.Key, KeyID: key.ID, SSHAddr: info.SSHAddr, HostKey: info.SSHHostKey,
		Address: key.Address, LBHostname: lb, Namespaces: ten.allowed, Owner: ten.owner,
	})
	if err := r.Client.Apply(ctx, secret, client.FieldOwner(status.ControllerFieldOwner), client.ForceOwnership); err != nil {
		return 0, fmt.Errorf("writing key Secret %s/%s: %w", r.Namespace, *secret.Name, err)
	}
	r.handedOver.Store(host, key.ID)
	log.FromContext(ctx).Info("issued tunnel key for Ingress host", "host", host, "keyID", key.ID)
	var next time.Duration
	if at, ok := key.RenewAt(); ok {
		next = max(at.Sub(r.now()), time.Second)
	}
	return next, r.revoke(ctx, keys, key.ID)
}

// handBack revokes, before a key of owner is issued for host, the keys
// of other owners when host is one of the edge's Gateway addresses, and
// returns the keys left. The controller decides which Gateway holds an
// address (gateway.AssignAddresses), and may move it to a Gateway of
// another namespace (freed, or taken back from a Gateway that only wants
// one); the edge lets the new owner claim it only once the previous
// owner's last key for it is gone, so the previous holder's tunnel ends
// here rather than holding the address forever.
func (r *Reconciler) handBack(ctx context.Context, host string, keys []apiwire.TunnelKey, owner string) ([]apiwire.TunnelKey, error) {
	info, err := r.Info.Get(ctx)
	if err != nil || !slices.Contains(info.GatewayAddresses, host) {
		return keys, nil
	}
	var left, gone []apiwire.TunnelKey
	for _, k := range keys {
		if k.Owner == owner {
			left = append(left, k)
		} else {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return keys, nil
	}
	log.FromContext(ctx).Info("the Gateway address moved to another namespace; revoking the previous holder's keys", "host", host, "owner", owner)
	return left, r.revoke(ctx, gone, "")
}

// release revokes the host's keys and deletes its Secret.
func (r *Reconciler) release(ctx context.Context, host string) error {
	keys, err := r.Edge.ListTunnelKeys(ctx, r.keyLabels(host))
	if err != nil {
		return fmt.Errorf("listing the keys of host %s: %w", host, err)
	}
	if err := r.revoke(ctx, keys, ""); err != nil {
		return err
	}
	r.handedOver.Delete(host)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: keysecret.HostName(host)}}
	if err := r.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting key Secret %s: %w", secret.Name, err)
	}
	return nil
}

// revoke revokes keys except keep.
func (r *Reconciler) revoke(ctx context.Context, keys []apiwire.TunnelKey, keep string) error {
	for _, k := range keys {
		if k.ID == keep {
			continue
		}
		if err := r.Edge.RevokeTunnelKey(ctx, k.ID); err != nil && !apiwire.IsNotFound(err) {
			return fmt.Errorf("revoking tunnel key %s: %w", k.ID, err)
		}
		if r.Hooks.Revoked != nil {
			r.Hooks.Revoked()
		}
		log.FromContext(ctx).Info("revoked tunnel key of Ingress host", "host", k.Labels[edgeapi.LabelHost], "keyID", k.ID)
	}
	return nil
}
