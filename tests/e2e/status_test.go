package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// A status write to an object that is gone is no error (nothing is left
// to report on, and a reconcile that counted it would look failed), while
// one the apiserver cannot take at all still is. Against the real
// apiserver, since that decides what a missing object looks like.
func TestStatusWriteToAGoneObject(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cond := metav1.Condition{Type: tunav1.ConditionReady, Status: metav1.ConditionTrue, Reason: tunav1.ReasonConnected,
		Message: "test", LastTransitionTime: metav1.Now()}
	fields := status.Fields{Conditions: []metav1.Condition{cond}}

	err := status.Apply(ctx, env.CP.Client, tunav1.GroupVersion.WithKind("Tunnel"), key(ns, "never-created"), "e2e", fields)
	assert.NoError(t, err, "the status of a Tunnel that does not exist")

	unserved := schema.GroupVersionKind{Group: "nothing.example.test", Version: "v1", Kind: "Thing"}
	err = status.Apply(ctx, env.CP.Client, unserved, key(ns, "never-created"), "e2e", fields)
	assert.Error(t, err, "the status of a kind the apiserver does not serve")
}
