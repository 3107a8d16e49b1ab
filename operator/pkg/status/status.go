// Package status writes the status of tuna resources with server-side apply.
// The controller and the agent each own different status fields (the
// controller the KeyIssued condition and keyID, the agent Ready and url), so
// each applies only its own fields under its own field manager and neither
// overwrites the other.
package status

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Condition returns a condition of type typ, keeping the transition time of
// the existing condition when the status does not change.
func Condition(existing []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, generation int64) metav1.Condition {
	c := metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: metav1.Now(),
	}
	for _, old := range existing {
		if old.Type == typ && old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}

// Find returns the condition of type typ, or nil.
func Find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// Same reports whether two conditions say the same thing (ignoring times).
func Same(a *metav1.Condition, b metav1.Condition) bool {
	return a != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration
}

// Fields is the part of .status one field manager owns. Conditions are
// merged by type on the server (listType=map), so each manager lists only
// the condition types it owns.
type Fields struct {
	Conditions []metav1.Condition
	// Values are other status fields by JSON name ("url", "keyID", ...).
	Values map[string]any
}

// Apply server-side-applies fields to the status of the object of kind gvk.
// An object that no longer exists is not an error: a status write cannot
// create it, nothing is left to report on, and its deletion wakes the
// reconciler, which releases what the object held. Counting it as a
// failed reconcile would make churn (Tunnels created and deleted at once,
// as CI pipelines do) look like a broken controller (TunaReconcileErrors).
func Apply(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey, owner string, f Fields) error {
	st := map[string]any{}
	for k, v := range f.Values {
		st[k] = v
	}
	if len(f.Conditions) > 0 {
		conds := make([]any, 0, len(f.Conditions))
		for i := range f.Conditions {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&f.Conditions[i])
			if err != nil {
				return fmt.Errorf("encoding condition %s: %w", f.Conditions[i].Type, err)
			}
			conds = append(conds, m)
		}
		st["conditions"] = conds
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if objectGone(err, key) {
			return nil
		}
		return fmt.Errorf("applying status of %s %s: %w", gvk.Kind, key, err)
	}
	return nil
}

// objectGone reports whether err says that the object key itself does not
// exist, not that its kind is not served (a 404 that names no object).
func objectGone(err error, key client.ObjectKey) bool {
	var se *apierrors.StatusError
	if !apierrors.IsNotFound(err) || !errors.As(err, &se) {
		return false
	}
	d := se.ErrStatus.Details
	return d != nil && d.Name == key.Name
}
