// Package tunnelkey is the controller's Tunnel reconciler. For each Tunnel it
// holds exactly one ephemeral tunnel key on the edge, bound to the tunnel's
// protocol and address, and hands it to the agent through a Secret in the
// operator's namespace. Deleting the Tunnel revokes the key (finalizer), so
// its address stops answering at once.
package tunnelkey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// DefaultWorkers is the Tunnel reconciler's concurrency unless
// --concurrency asks for more: most of them wait on the edge's budget,
// where their key requests join one batch (edgeapi.Batcher).
const DefaultWorkers = 32

// Reconciler issues and revokes tunnel keys.
type Reconciler struct {
	Client    ctrl.Client
	Edge      edgeapi.TunnelKeys
	Namespace string // the operator's namespace, where key Secrets live
	ClusterID string
	// AllowExternalUpstreams mirrors the agent's setting, so that the
	// controller issues no key for an upstream the agent would refuse.
	AllowExternalUpstreams bool
	Hooks                  Hooks
	// Info caches the edge's facts (base domain, SSH address, host key).
	Info *edgeapi.InfoCache
	// Resync re-checks that a tunnel's key still exists on the edge, so a
	// key revoked there by hand is replaced (default 2 minutes). A key is
	// also looked at when it is due for renewal, if that comes sooner.
	Resync time.Duration
	// Sweep revokes the keys of a deleted Tunnel (by namespace/name) whose
	// Tunnel is gone, and says how many: orphans.Collector.CollectTunnel.
	// Nil: a Tunnel that went without its finalizer keeps its key until
	// the orphan collector's next sweep.
	Sweep func(ctx context.Context, key types.NamespacedName) (int, error)
	// Workers is how many Tunnels are reconciled at once (0: the
	// manager's --concurrency). A key request waits for the edge's budget
	// in a queue that goes to the edge as one batch, so the more Tunnels
	// wait there together, the fewer calls a cold start makes.
	Workers int
	// Now is the clock that decides renewals (default time.Now; unit tests
	// pin it with the fake edge's).
	Now func() time.Time
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// recheckKey is recheck, or sooner when key is due for renewal before.
func (r *Reconciler) recheckKey(key *apiwire.TunnelKey) reconcile.Result {
	res := r.recheck()
	if at, ok := key.RenewAt(); ok {
		res.RequeueAfter = edgeapi.Sooner(res.RequeueAfter, max(at.Sub(r.now()), time.Second))
	}
	return res
}

// recheck schedules the next look at the key, jittered (edgeapi.Jitter)
// so that Tunnels created together (an install, a restart) come due
// apart. The look reads the shared view of the keys, not the edge.
func (r *Reconciler) recheck() reconcile.Result {
	return reconcile.Result{RequeueAfter: edgeapi.Jitter(Resync(r.Resync))}
}

// Resync is the period of the look at a Tunnel's key: d, or 2 minutes.
func Resync(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return 2 * time.Minute
}

// sameAddress reports whether a key's stored address is the wanted one: the
// edge stores a subdomain label expanded under its base domain. When the
// edge's facts cannot be read it says so: "cannot tell" must never be
// taken for "changed", which would revoke a working key.
func (r *Reconciler) sameAddress(ctx context.Context, have, want string) (bool, error) {
	if have == want {
		return true, nil
	}
	if strings.Contains(want, ".") {
		return false, nil
	}
	info, err := r.Info.Get(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the edge's base domain: %w", err)
	}
	return have == want+"."+info.BaseDomain, nil
}

// Hooks observe key operations for metrics; nil fields are skipped.
type Hooks struct {
	Issued  func()
	Revoked func()
}

// converge keeps exactly one fitting key for the Tunnel (or none).
func (r *Reconciler) converge(ctx context.Context, tun *tunav1.Tunnel) (reconcile.Result, error) {

	want, refusal, err := r.desiredKey(ctx, tun)
	if err != nil {
		return reconcile.Result{}, err
	}
	if refusal != nil {
		// No key for a spec the agent would refuse: revoke any old one.
		if err := r.revokeAll(ctx, tun, ""); err != nil {
			return r.edgeFailed(ctx, tun, err)
		}
		return reconcile.Result{}, r.setKeyIssued(ctx, tun, metav1.ConditionFalse, refusal.Reason, refusal.Message, "")
	}

	if ref := tun.Spec.APIKeySecretRef; ref != nil {
		return r.useOwnKey(ctx, tun, want, ref.Name)
	}
	keys, err := r.Edge.ListTunnelKeys(ctx, r.ownerLabels(tun))
	if err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	gone := "the tunnel's key is gone on the edge (revoked by hand?); issuing a new one"
	for _, k := range keys {
		if k.ID != tun.Status.KeyID || k.Protocol != want.Protocol || k.Owner != want.Owner {
			continue
		}
		same, err := r.sameAddress(ctx, k.Address, want.Address)
		if err != nil {
			return r.edgeFailed(ctx, tun, err)
		}
		if same {
			// A renewal the edge could not answer keeps the key: it is
			// still valid for up to half its TTL, and edgeFailed shows
			// Unknown and retries with backoff.
			next, expired, err := edgeapi.KeepKey(ctx, r.Edge, &k, r.now())
			if err != nil {
				return r.edgeFailed(ctx, tun, err)
			}
			if expired {
				// Renewals were missed (controller or edge down longer
				// than half a TTL): only a new key brings the tunnel back.
				gone = "the tunnel's key expired on the edge before it was renewed; issuing a new one"
				break
			}
			// The key the agent holds still fits; drop any strays (a crash
			// between issuing and recording a key leaves one behind).
			if err := r.revoke(ctx, keys, k.ID); err != nil {
				return r.edgeFailed(ctx, tun, err)
			}
			res := r.recheck()
			res.RequeueAfter = edgeapi.Sooner(res.RequeueAfter, next)
			return res, r.setKeyIssued(ctx, tun, metav1.ConditionTrue, tunav1.ReasonKeyIssued,
				"a temporary tunnel key is issued for "+describe(want), k.ID)
		}
	}
	if tun.Status.KeyID != "" {
		log.FromContext(ctx).Info(gone, "keyID", tun.Status.KeyID)
	}
	return r.issue(ctx, tun, want, keys)
}

// desiredKey is the key the tunnel needs, or why it gets none.
func (r *Reconciler) desiredKey(ctx context.Context, tun *tunav1.Tunnel) (apiwire.CreateTunnelKey, *upstream.Refusal, error) {
	if _, err := upstream.Parse(tun.Spec.Upstream.URL, string(tun.Spec.Protocol), tun.Namespace, r.AllowExternalUpstreams); err != nil {
		if ref := (*upstream.Refusal)(nil); errors.As(err, &ref) {
			return apiwire.CreateTunnelKey{}, ref, nil
		}
		return apiwire.CreateTunnelKey{}, &upstream.Refusal{Reason: tunav1.ReasonInvalidSpec, Message: err.Error()}, nil
	}
	want := apiwire.CreateTunnelKey{Protocol: string(tun.Spec.Protocol), Labels: r.ownerLabels(tun),
		Owner: edgeapi.Owner(r.ClusterID, tun.Namespace)}
	switch {
	case tun.Spec.Protocol == tunav1.ProtocolTCP:
		want.Address = tun.Spec.PortOrAlias
	case tun.Spec.Subdomain != "":
		want.Address = tun.Spec.Subdomain
	case tun.Spec.DomainRef != nil:
		fqdn, refusal, err := r.domainAddress(ctx, tun.Namespace, tun.Spec.DomainRef.Name)
		if refusal != nil || err != nil {
			return want, refusal, err
		}
		want.Address = fqdn
	}
	return want, nil, nil
}

// domainAddress is the full name of a Ready Domain of the namespace.
func (r *Reconciler) domainAddress(ctx context.Context, namespace, name string) (string, *upstream.Refusal, error) {
	var d tunav1.Domain
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &upstream.Refusal{Reason: tunav1.ReasonDomainNotReady,
				Message: fmt.Sprintf("Domain %s/%s does not exist: create it, or use spec.subdomain", namespace, name)}, nil
		}
		return "", nil, fmt.Errorf("reading Domain %s/%s: %w", namespace, name, err)
	}
	// Unknown is a Domain whose reservation was made and that the edge API
	// cannot confirm right now: keep serving it (fail static).
	ready := status.Find(d.Status.Conditions, tunav1.ConditionReady)
	if ready == nil || ready.Status == metav1.ConditionFalse || d.Status.FQDN == "" {
		msg := fmt.Sprintf("Domain %s/%s is not Ready yet", namespace, name)
		if ready != nil {
			msg += ": " + ready.Message
		}
		return "", &upstream.Refusal{Reason: tunav1.ReasonDomainNotReady, Message: msg}, nil
	}
	return d.Status.FQDN, nil, nil
}

// useOwnKey serves a tunnel that brings its own tunnels:connect key
// (spec.apiKeySecretRef, R2): the operator issues none, and hands the agent
// only the edge's address, host key and the tunnel's address.
func (r *Reconciler) useOwnKey(ctx context.Context, tun *tunav1.Tunnel, want apiwire.CreateTunnelKey, secretName string) (reconcile.Result, error) {
	if err := r.revokeAll(ctx, tun, ""); err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	if err := r.writeSecret(ctx, tun, keysecret.Contents{Address: want.Address}); err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	return reconcile.Result{}, r.setKeyIssued(ctx, tun, metav1.ConditionTrue, tunav1.ReasonKeyIssued,
		fmt.Sprintf("the tunnel uses its own API key from Secret %s (field api-key)", secretName), "")
}

// writeSecret hands the connection details to the agent.
func (r *Reconciler) writeSecret(ctx context.Context, tun *tunav1.Tunnel, c keysecret.Contents) error {
	info, err := r.Info.Get(ctx)
	if err != nil {
		return err
	}
	c.SSHAddr, c.HostKey = info.SSHAddr, info.SSHHostKey
	secret := keysecret.Apply(r.Namespace, "Tunnel", tun, c)
	if err := r.Client.Apply(ctx, secret, ctrl.FieldOwner(status.ControllerFieldOwner), ctrl.ForceOwnership); err != nil {
		return fmt.Errorf("writing key Secret %s/%s: %w", r.Namespace, *secret.Name, err)
	}
	return nil
}

func (r *Reconciler) ownerLabels(tun *tunav1.Tunnel) map[string]string {
	return map[string]string{
		edgeapi.LabelCluster:   r.ClusterID,
		edgeapi.LabelKind:      "Tunnel",
		edgeapi.LabelNamespace: tun.Namespace,
		edgeapi.LabelName:      tun.Name,
		edgeapi.LabelUID:       string(tun.UID),
	}
}

// issue revokes whatever keys the tunnel had, issues a new one, and hands
// it to the agent. The Secret is written before status names the key, so a
// keyID in status always has its Secret.
func (r *Reconciler) issue(ctx context.Context, tun *tunav1.Tunnel, want apiwire.CreateTunnelKey, old []apiwire.TunnelKey) (reconcile.Result, error) {
	// The Secret needs the edge's facts: fail before revoking anything,
	// not with a new key in hand that no Secret holds.
	if _, err := r.Info.Get(ctx); err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	if err := r.revoke(ctx, old, ""); err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	key, err := r.Edge.CreateTunnelKey(ctx, want)
	if err != nil {
		// The old keys are revoked by now: no key is live to keep.
		return r.issueFailed(ctx, tun, err)
	}
	if r.Hooks.Issued != nil {
		r.Hooks.Issued()
	}
	if err := r.writeSecret(ctx, tun, keysecret.Contents{TunnelKey: key.Key, KeyID: key.ID, Address: key.Address}); err != nil {
		return r.edgeFailed(ctx, tun, err)
	}
	log.FromContext(ctx).Info("issued tunnel key", "keyID", key.ID, "address", want.Address)
	return r.recheckKey(key), r.setKeyIssued(ctx, tun, metav1.ConditionTrue, tunav1.ReasonKeyIssued,
		"a temporary tunnel key is issued for "+describe(want), key.ID)
}

// revokeAll revokes the tunnel's keys except keep.
func (r *Reconciler) revokeAll(ctx context.Context, tun *tunav1.Tunnel, keep string) error {
	keys, err := r.Edge.ListTunnelKeys(ctx, r.ownerLabels(tun))
	if err != nil {
		return err
	}
	return r.revoke(ctx, keys, keep)
}

// revoke revokes keys except keep.
func (r *Reconciler) revoke(ctx context.Context, keys []apiwire.TunnelKey, keep string) error {
	for _, k := range keys {
		if k.ID == keep {
			continue
		}
		if err := r.Edge.RevokeTunnelKey(ctx, k.ID); err != nil && !apiwire.IsNotFound(err) {
			return err
		}
		if r.Hooks.Revoked != nil {
			r.Hooks.Revoked()
		}
		log.FromContext(ctx).Info("revoked tunnel key", "keyID", k.ID)
	}
	return nil
}

// finalize revokes the key and removes its Secret, then lets the Tunnel go.
func (r *Reconciler) finalize(ctx context.Context, tun *tunav1.Tunnel) (reconcile.Result, error) {
	if err := r.revokeAll(ctx, tun, ""); err != nil {
		return reconcile.Result{}, fmt.Errorf("revoking the keys of Tunnel %s/%s: %w", tun.Namespace, tun.Name, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: keysecret.Name("Tunnel", tun.UID)}}
	if err := r.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("deleting key Secret %s: %w", secret.Name, err)
	}
	return reconcile.Result{}, nil
}

// edgeFailed records an edge API failure that left the tunnel's key as it
// was: whatever the edge answered, the key in status.keyID is not known to
// be bad, so KeyIssued goes Unknown (never False, which would make the
// agent stop a tunnel that serves traffic) and the check is repeated.
func (r *Reconciler) edgeFailed(ctx context.Context, tun *tunav1.Tunnel, err error) (reconcile.Result, error) {
	f := edgeapi.Classify(err, tunav1.ReasonKeyIssueFailed)
	st, res, retErr := f.KeepLive(r.recheck().RequeueAfter)
	if tun.Status.KeyID == "" && tun.Spec.APIKeySecretRef == nil {
		st = f.Status() // nothing runs yet: a refusal is final until the spec changes
		res, retErr = f.Result()
	}
	msg := f.Message
	if st == metav1.ConditionUnknown && tun.Status.KeyID != "" {
		msg += "; the tunnel keeps serving with its key " + tun.Status.KeyID
	}
	if serr := r.setKeyIssued(ctx, tun, st, f.Reason, msg, tun.Status.KeyID); serr != nil {
		return reconcile.Result{}, serr
	}
	if !f.Transient {
		log.FromContext(ctx).Info("the edge refused a tunnel key call", "error", err.Error())
	}
	return res, retErr
}

// issueFailed records a failure to issue a key once the old ones are gone:
// a refusal is final until the spec changes (KeyIssued=False), a transient
// failure retries with KeyIssued=Unknown. An address another namespace
// owns is tried again at the next resync (its owner may share it
// meanwhile).
func (r *Reconciler) issueFailed(ctx context.Context, tun *tunav1.Tunnel, err error) (reconcile.Result, error) {
	if m, ok := edgeapi.Owned(err, r.ClusterID, tun.Namespace); ok {
		if serr := r.setKeyIssued(ctx, tun, metav1.ConditionFalse, tunav1.ReasonAddressOwned, m, ""); serr != nil {
			return reconcile.Result{}, serr
		}
		return r.recheck(), nil
	}
	f := edgeapi.Classify(err, tunav1.ReasonKeyIssueFailed)
	if serr := r.setKeyIssued(ctx, tun, f.Status(), f.Reason, f.Message, ""); serr != nil {
		return reconcile.Result{}, serr
	}
	if !f.Transient {
		log.FromContext(ctx).Info("the edge refused the tunnel key; waiting for a spec change", "error", err.Error())
	}
	return f.Result()
}

func (r *Reconciler) setKeyIssued(ctx context.Context, tun *tunav1.Tunnel, st metav1.ConditionStatus, reason, msg, keyID string) error {
	cond := status.Condition(tun.Status.Conditions, tunav1.ConditionKeyIssued, st, reason, msg, tun.Generation)
	if status.Same(status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued), cond) && tun.Status.KeyID == keyID {
		return nil
	}
	return status.Apply(ctx, r.Client, tunav1.GroupVersion.WithKind("Tunnel"), types.NamespacedName{Namespace: tun.Namespace, Name: tun.Name},
		status.ControllerFieldOwner, status.Fields{Conditions: []metav1.Condition{cond}, Values: map[string]any{"keyID": keyID}})
}

func describe(k apiwire.CreateTunnelKey) string {
	if k.Address == "" {
		return k.Protocol
	}
	return k.Protocol + " " + k.Address
}
