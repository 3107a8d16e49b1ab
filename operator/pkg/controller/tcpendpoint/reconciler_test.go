package tcpendpoint

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// endpoints is an in-memory stand-in for the edge's TCP endpoints, for
// unit tests only: it refuses deletions on demand, which a real edge does
// not (the end-to-end test injects the same through a proxy).
type endpoints struct {
	edgeapi.Reservations // other calls are not used here
	mu                   sync.Mutex
	aliases              map[string]bool
	refuse               error
}

func (e *endpoints) DeleteTCPEndpoint(_ context.Context, alias, _ string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuse != nil {
		return e.refuse
	}
	delete(e.aliases, alias)
	return nil
}

// deleting is a TCPEndpoint that the operator reserved, being deleted.
func deleting(name string, annotations map[string]string) *tunav1.TCPEndpoint {
	now := metav1.Now()
	return &tunav1.TCPEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(name), Generation: 1, Annotations: annotations,
			DeletionTimestamp: &now, Finalizers: []string{tunav1.FinalizerReservation}},
		Spec:   tunav1.TCPEndpointSpec{Alias: name},
		Status: tunav1.TCPEndpointStatus{Port: 40000, Address: "edge:40000"},
	}
}

// A release the edge refuses keeps the finalizer, says on Ready how to
// unblock it, and is retried without any change to the object; the
// force-release annotation lets the object go, with a warning event.
func TestRefusedReleaseKeepsFinalizer(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	held, forced := deleting("held", nil), deleting("forced", map[string]string{tunav1.AnnotationForceRelease: "true"})
	kube := crfake.NewClientBuilder().WithScheme(s).WithObjects(held, forced).WithStatusSubresource(held, forced).Build()
	edge := &endpoints{aliases: map[string]bool{"held": true, "forced": true},
		refuse: fake.APIError(http.StatusForbidden, apiwire.CodeForbidden)}
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: kube, Reader: kube, Edge: edge, Recorder: rec}
	b := &base.Reconciler[*tunav1.TCPEndpoint]{Client: kube, New: func() *tunav1.TCPEndpoint { return &tunav1.TCPEndpoint{} },
		Finalizer: tunav1.FinalizerReservation, Finalize: r.finalize, Converge: r.converge}
	ctx := context.Background()
	reconcileOne := func(name string) (reconcile.Result, error) {
		return b.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}})
	}

	res, err := reconcileOne("held")
	if err != nil || res.RequeueAfter <= 0 {
		t.Errorf("refused release: %+v, %v; want a periodic retry", res, err)
	}
	var got tunav1.TCPEndpoint
	if err := kube.Get(ctx, client.ObjectKeyFromObject(held), &got); err != nil {
		t.Fatalf("the TCPEndpoint must stay while its release is refused: %v", err)
	}
	ready := status.Find(got.Status.Conditions, tunav1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tunav1.ReasonReleaseBlocked ||
		!strings.Contains(ready.Message, "kubectl annotate tcpendpoint held -n team k8s.tuna.am/force-release=true") {
		t.Fatalf("Ready %+v: want False ReleaseBlocked saying how to force it", ready)
	}
	if !edge.aliases["held"] {
		t.Fatal("nothing was released")
	}

	if _, err := reconcileOne("forced"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(forced), &got); !apierrors.IsNotFound(err) {
		t.Errorf("force-release must let the object go, got %v", err)
	}
	var forcedEvent string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, tunav1.ReasonReleaseForced) {
			forcedEvent = e
		}
	}
	if !strings.Contains(forcedEvent, "TCP endpoint forced was not released") || !strings.Contains(forcedEvent, "may remain on the edge") {
		t.Errorf("event %q: want ReleaseForced naming what is left on the edge", forcedEvent)
	}

	edge.refuse = nil
	if _, err := reconcileOne("held"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(held), &got); !apierrors.IsNotFound(err) || edge.aliases["held"] {
		t.Errorf("once the edge accepts, the retry releases and lets go: %v, still reserved %v", err, edge.aliases["held"])
	}
}

// reservations is an in-memory edge of TCP endpoints for the churn test.
type reservations struct {
	edgeapi.Reservations // other calls are not used here
	aliases              map[string]apiwire.TCPEndpoint
}

func (e *reservations) GetTCPEndpoint(_ context.Context, alias string) (*apiwire.TCPEndpoint, error) {
	ep, ok := e.aliases[alias]
	if !ok {
		return nil, fake.APIError(http.StatusNotFound, apiwire.CodeNotFound)
	}
	return &ep, nil
}

func (e *reservations) CreateTCPEndpoint(_ context.Context, in apiwire.CreateTCPEndpoint) (*apiwire.TCPEndpoint, error) {
	ep := apiwire.TCPEndpoint{Alias: in.Alias, Port: 40000 + len(e.aliases), Address: "edge:40000", Sharing: in.Sharing}
	e.aliases[in.Alias] = ep
	return &ep, nil
}

func (e *reservations) DeleteTCPEndpoint(_ context.Context, alias, owner string) error {
	if e.aliases[alias].Owner != owner {
		return fake.APIError(http.StatusForbidden, apiwire.CodeAddressOwned)
	}
	delete(e.aliases, alias)
	return nil
}

// Over 1,000 TCPEndpoints reserved, deleted and released, the reconciler
// keeps nothing of the gone ones: the Ready it wrote for each (which
// de-duplicates its events) and what each held are forgotten with it.
func TestReservationMemoryIsFlatOverChurn(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kube := crfake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&tunav1.TCPEndpoint{}).Build()
	edge := &reservations{aliases: map[string]apiwire.TCPEndpoint{}}
	r := &Reconciler{Client: kube, Reader: kube, Edge: edge, Recorder: &events.FakeRecorder{}, ClusterID: "c1"}
	b := &base.Reconciler[*tunav1.TCPEndpoint]{Client: kube, New: func() *tunav1.TCPEndpoint { return &tunav1.TCPEndpoint{} },
		Finalizer: tunav1.FinalizerReservation, Finalize: r.finalize, Converge: r.converge, Gone: r.gone}
	ctx := context.Background()
	for i := range 1000 {
		key := types.NamespacedName{Namespace: "team", Name: fmt.Sprintf("pg-%d", i)}
		e := &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: tunav1.TCPEndpointSpec{Alias: key.Name}}
		if err := kube.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the finalizer, then the reservation
			if _, err := b.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
		}
		if err := kube.Get(ctx, key, e); err != nil || status.Find(e.Status.Conditions, tunav1.ConditionReady).Reason != tunav1.ReasonReserved {
			t.Fatalf("cycle %d: %+v %v", i, e.Status, err)
		}
		if err := kube.Delete(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, key, e); !apierrors.IsNotFound(err) {
			t.Fatalf("cycle %d: the TCPEndpoint stays: %v", i, err)
		}
	}
	if n := reservation.Remembered(); n != 0 {
		t.Errorf("the reconciler remembers the Ready of %d gone TCPEndpoints", n)
	}
	if len(edge.aliases) != 0 {
		t.Errorf("%d reservations were not released", len(edge.aliases))
	}
	if n := r.held.Len(); n != 0 {
		t.Errorf("the ledger holds %d gone TCPEndpoints", n)
	}
}
