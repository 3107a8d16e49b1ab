// Package secretsync keeps Kubernetes Secrets equal to secrets kept on the
// edge (SecretSync resources): it reads the edge secrets with the
// operator's key (within Policy) or the resource's own key, computes the
// Secret's data (Build), and server-side applies it under its own field
// manager. A long poll per key (Hub) makes changes arrive within a second;
// the refresh interval is the fallback. A failure of the edge never touches
// the Secret: the last synced values stay.
package secretsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// DefaultRefresh is spec.refreshInterval's default.
const DefaultRefresh = 5 * time.Minute

// Reconciler keeps each SecretSync's target Secret current.
type Reconciler struct {
	Client client.Client
	// Reader reads uncached: the target's metadata and apiKeySecretRef
	// Secrets (the controller watches no Secrets).
	Reader client.Reader
	// Edge reads secrets with the operator's key.
	Edge SecretsAPI
	// NewAPI makes a client of the edge API with another key.
	NewAPI   func(apiKey string) SecretsAPI
	Policy   Policy
	Hub      *Hub
	Recorder recorder.EventRecorder
}

var transitions status.Transitions

// converge makes the target Secret hold the edge's current values.
func (r *Reconciler) converge(ctx context.Context, ss *tunav1.SecretSync) (reconcile.Result, error) {
	api, cred, err := r.credentials(ctx, ss)
	if err != nil {
		return r.refused(ctx, ss, err)
	}
	r.Hub.Subscribe(client.ObjectKeyFromObject(ss), cred, api, ss.Spec.Source)

	sources, err := r.fetch(ctx, api, ss.Spec.Source)
	if err != nil {
		return r.edgeFailed(ctx, ss, err)
	}
	data, err := Build(sources, ss.Spec.Target)
	if err != nil {
		return r.refused(ctx, ss, err)
	}
	target := targetName(ss)
	existing, err := r.targetMeta(ctx, ss.Namespace, target)
	if err != nil {
		return reconcile.Result{}, err
	}
	if existing != nil && !ownedBy(existing, ss) && !ss.Spec.Target.AdoptExisting {
		return r.refused(ctx, ss, &BuildError{Reason: tunav1.ReasonTargetNotOwned, Message: fmt.Sprintf(
			"Secret %s/%s exists and was not created by this SecretSync, so it is left as it is: delete it, choose another spec.target.name, or set spec.target.name: %s and spec.target.adoptExisting: true to take it over",
			ss.Namespace, target, target)})
	}
	synced := syncedOf(sources)
	changed := existing == nil || existing.Annotations[tunav1.AnnotationSecretSyncSource] != sourceAnnotation(synced) ||
		ss.Status.ObservedGeneration != ss.Generation
	if err := r.Client.Apply(ctx, r.secret(ss, target, data, synced), client.FieldOwner(status.SecretSyncFieldOwner), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying Secret %s/%s: %w", ss.Namespace, target, err)
	}
	result := metrics.SyncUnchanged
	if changed {
		result = metrics.SyncUpdated
		r.Recorder.Eventf(ss, nil, corev1.EventTypeNormal, "Updated", "Sync", "Secret %s holds %d keys from %s",
			target, len(data), sourceAnnotation(synced))
	}
	metrics.SecretSyncs.WithLabelValues(result).Inc()
	now := metav1.Now()
	metrics.SecretSyncLastSuccess.WithLabelValues(ss.Namespace, ss.Name).Set(float64(now.Unix()))
	ss.Status.Sources, ss.Status.LastSyncTime, ss.Status.Target = synced, &now, target
	msg := fmt.Sprintf("Secret %s holds the current values of %s (%d keys)", target, sourceAnnotation(synced), len(data))
	if err := r.writeStatus(ctx, ss, metav1.ConditionTrue, tunav1.ReasonSynced, msg); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: refresh(ss)}, nil
}

// credentials picks the key to read with: the SecretSync's own, or the
// operator's within its policy. cred identifies the key for the Hub
// without holding it.
func (r *Reconciler) credentials(ctx context.Context, ss *tunav1.SecretSync) (SecretsAPI, string, error) {
	ref := ss.Spec.APIKeySecretRef
	if ref == nil {
		if err := r.Policy.Allowed(ss.Namespace, ss.Spec.Source); err != nil {
			return nil, "", &BuildError{Reason: tunav1.ReasonNotAllowed, Message: err.Error()}
		}
		return r.Edge, "operator", nil
	}
	var s corev1.Secret
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ref.Name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, "", &BuildError{Reason: tunav1.ReasonAPIKeyInvalid, Message: fmt.Sprintf(
			"Secret %s/%s of spec.apiKeySecretRef does not exist: create it with the field api-key holding an API key with the secrets:read scope", ss.Namespace, ref.Name)}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading Secret %s/%s of spec.apiKeySecretRef: %w", ss.Namespace, ref.Name, err)
	}
	key := strings.TrimSpace(string(s.Data["api-key"]))
	if key == "" {
		return nil, "", &BuildError{Reason: tunav1.ReasonAPIKeyInvalid, Message: fmt.Sprintf(
			"Secret %s/%s of spec.apiKeySecretRef has no field api-key: put an API key with the secrets:read scope there", ss.Namespace, ref.Name)}
	}
	sum := sha256.Sum256([]byte(key))
	return r.NewAPI(key), ss.Namespace + "/" + ref.Name + "#" + hex.EncodeToString(sum[:6]), nil
}

// fetch reads the edge secrets of source with their values, sorted by
// name. None found is SourceNotFound.
func (r *Reconciler) fetch(ctx context.Context, api SecretsAPI, source tunav1.SecretSyncSource) ([]apiwire.Secret, error) {
	prefix := source.Prefix
	if source.Name != "" {
		prefix = source.Name
	}
	list, err := api.ListSecrets(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []apiwire.Secret
	for _, item := range list.Items {
		if source.Name != "" && item.Name != source.Name {
			continue
		}
		s, err := api.GetSecret(ctx, item.Name)
		if apiwire.IsNotFound(err) {
			continue // deleted since the list; the next run sees the list without it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	if len(out) == 0 {
		what, example := "edge secret named "+source.Name, source.Name
		if source.Name == "" {
			what, example = "edge secret whose name starts with "+source.Prefix, source.Prefix+"<name>"
		}
		return nil, &BuildError{Reason: tunav1.ReasonSourceNotFound, Message: fmt.Sprintf(
			"the key finds no %s: create it on the edge (tuna-edge secrets set %s key=value) or fix spec.source; a key confined to a secret prefix sees only names under it",
			what, example)}
	}
	return out, nil
}

// targetMeta reads the target Secret's metadata only (the operator never
// reads values it did not write); nil when it does not exist.
func (r *Reconciler) targetMeta(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	return m, nil
}

// ownedBy reports whether ss controls the Secret.
func ownedBy(m metav1.Object, ss *tunav1.SecretSync) bool {
	for _, o := range m.GetOwnerReferences() {
		if o.UID == ss.UID && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// secret is the whole target Secret as this controller owns it.
func (r *Reconciler) secret(ss *tunav1.SecretSync, name string, data map[string][]byte, synced []tunav1.SyncedSecret) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(name, ss.Namespace).
		WithLabels(map[string]string{
			tunav1.LabelSecretSync:         ss.Name,
			"app.kubernetes.io/managed-by": "tuna-operator",
		}).
		WithAnnotations(map[string]string{tunav1.AnnotationSecretSyncSource: sourceAnnotation(synced)}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(tunav1.GroupVersion.String()).WithKind("SecretSync").
			WithName(ss.Name).WithUID(ss.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}

func targetName(ss *tunav1.SecretSync) string {
	if ss.Spec.Target.Name != "" {
		return ss.Spec.Target.Name
	}
	return ss.Name
}

func refresh(ss *tunav1.SecretSync) time.Duration {
	if ss.Spec.RefreshInterval != nil && ss.Spec.RefreshInterval.Duration > 0 {
		return ss.Spec.RefreshInterval.Duration
	}
	return DefaultRefresh
}

func syncedOf(sources []apiwire.Secret) []tunav1.SyncedSecret {
	out := make([]tunav1.SyncedSecret, len(sources))
	for i, s := range sources {
		out[i] = tunav1.SyncedSecret{Name: s.Name, Version: s.Version}
	}
	return out
}

// sourceAnnotation is name@version of each source, comma-separated.
func sourceAnnotation(synced []tunav1.SyncedSecret) string {
	parts := make([]string, len(synced))
	for i, s := range synced {
		parts[i] = s.Name + "@" + strconv.FormatInt(s.Version, 10)
	}
	return strings.Join(parts, ",")
}

// refused shows a refusal (of the policy, the spec or the edge) as
// Ready=False and looks again after the refresh interval, since the fix
// may be made on the edge rather than in the spec. The Secret is kept.
func (r *Reconciler) refused(ctx context.Context, ss *tunav1.SecretSync, err error) (reconcile.Result, error) {
	var be *BuildError
	if !errors.As(err, &be) {
		return reconcile.Result{}, err
	}
	metrics.SecretSyncs.WithLabelValues(metrics.SyncRefused).Inc()
	if werr := r.writeStatus(ctx, ss, metav1.ConditionFalse, be.Reason, be.Message); werr != nil {
		return reconcile.Result{}, werr
	}
	return reconcile.Result{RequeueAfter: refresh(ss)}, nil
}

// edgeFailed maps an edge error: unreachable shows Unknown and backs off,
// keeping the Secret; a refusal of the key shows APIKeyInvalid.
func (r *Reconciler) edgeFailed(ctx context.Context, ss *tunav1.SecretSync, err error) (reconcile.Result, error) {
	var be *BuildError
	if errors.As(err, &be) {
		return r.refused(ctx, ss, err)
	}
	f := edgeapi.Classify(err, tunav1.ReasonAPIKeyInvalid)
	if !f.Transient {
		whose := "the operator's key"
		if ss.Spec.APIKeySecretRef != nil {
			whose = "the key of spec.apiKeySecretRef"
		}
		return r.refused(ctx, ss, &BuildError{Reason: tunav1.ReasonAPIKeyInvalid, Message: fmt.Sprintf(
			"the edge refused %s: %s; it needs the secrets:read scope, and a secret prefix (if it has one) that covers spec.source",
			whose, edgeapi.Message(err))})
	}
	metrics.SecretSyncs.WithLabelValues(metrics.SyncFailed).Inc()
	log.FromContext(ctx).Info("edge unreachable; keeping the last synced Secret", "err", err)
	msg := f.Message + "; the Secret keeps the values of the last sync"
	if werr := r.writeStatus(ctx, ss, metav1.ConditionUnknown, f.Reason, msg); werr != nil {
		return reconcile.Result{}, werr
	}
	return f.Result()
}

// writeStatus applies every status field this controller owns (a field
// left out of an apply would be removed) and records an event when Ready
// changes.
func (r *Reconciler) writeStatus(ctx context.Context, ss *tunav1.SecretSync, st metav1.ConditionStatus, reason, msg string) error {
	old := status.Find(ss.Status.Conditions, tunav1.ConditionReady)
	cond := status.Condition(ss.Status.Conditions, tunav1.ConditionReady, st, reason, msg, ss.Generation)
	sources := make([]any, len(ss.Status.Sources))
	for i, s := range ss.Status.Sources {
		sources[i] = map[string]any{"name": s.Name, "version": s.Version}
	}
	values := map[string]any{"observedGeneration": ss.Generation, "sources": sources}
	if len(ss.Status.Sources) > 0 {
		values["syncedVersion"] = Versions(ss.Status.Sources)
	}
	if ss.Status.Target != "" {
		values["target"] = ss.Status.Target
	}
	if t := ss.Status.LastSyncTime; t != nil {
		values["lastSyncTime"] = t.UTC().Format(time.RFC3339)
	}
	err := status.Apply(ctx, r.Client, tunav1.GroupVersion.WithKind("SecretSync"), client.ObjectKeyFromObject(ss), status.SecretSyncFieldOwner,
		status.Fields{Conditions: []metav1.Condition{cond}, Values: values})
	if err != nil {
		return err
	}
	if transitions.Changed(ss, old, cond) {
		typ := corev1.EventTypeNormal
		if st != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(ss, nil, typ, reason, "Sync", "%s", msg)
	}
	return nil
}
