package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// certEdge is a fake of the edge's certificate calls with its ownership
// rule: only the owner that holds a host sets or removes its certificate
// (address_owned naming the holder otherwise), a host nobody holds is
// not_found. The real edge's rule is tested in edge/internal/api and end
// to end in tests/e2e/https.
type certEdge struct {
	holder map[string]string // host -> owner
	stored map[string]string // host -> owner of the stored certificate
	calls  []string
}

func (e *certEdge) check(host, owner string) error {
	h, ok := e.holder[host]
	switch {
	case !ok:
		return &apiwire.APIError{Status: http.StatusNotFound, Code: apiwire.CodeNotFound, Message: "held by no owner"}
	case h != owner:
		return &apiwire.APIError{Status: http.StatusForbidden, Code: apiwire.CodeAddressOwned, Owner: h, Address: host, Message: "owned"}
	}
	return nil
}

func (e *certEdge) PutCertificate(_ context.Context, host, owner string, _ apiwire.PutCertificate) (*apiwire.Certificate, error) {
	e.calls = append(e.calls, "PUT "+host+" "+owner)
	if err := e.check(host, owner); err != nil {
		return nil, err
	}
	e.stored[host] = owner
	return &apiwire.Certificate{Host: host, Owner: owner}, nil
}

func (e *certEdge) DeleteCertificate(_ context.Context, host, owner string) error {
	e.calls = append(e.calls, "DELETE "+host+" "+owner)
	if err := e.check(host, owner); err != nil {
		return err
	}
	if _, ok := e.stored[host]; !ok {
		return &apiwire.APIError{Status: http.StatusNotFound, Code: apiwire.CodeNotFound}
	}
	delete(e.stored, host)
	return nil
}

func issue(t *testing.T, ca *testca.CA, name string) model.Certificate {
	t.Helper()
	c, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := testca.PEMFiles(c)
	if err != nil {
		t.Fatal(err)
	}
	return model.Certificate{Name: name, CertPEM: certPEM, KeyPEM: keyPEM}
}

// httpsGateway is an evaluated Gateway of namespace ns with one
// programmed HTTPS listener for host, with cert.
func httpsGateway(ns, host string, cert model.Certificate) (*gwv1.Gateway, model.Evaluated) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw", Generation: 2}}
	l := model.Listener{Name: "https", Protocol: gwv1.HTTPSProtocolType, Host: host, Accepted: true, Programmed: true,
		Certs: []model.Certificate{cert}, Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"}}}
	return gw, model.Evaluated{Gateway: gw, Listeners: []model.Listener{l}}
}

func programmed(t *testing.T, ev model.Gateways, ns string) (bool, string) {
	t.Helper()
	l := ev[types.NamespacedName{Namespace: ns, Name: "gw"}].Listeners[0]
	for _, c := range l.Conditions {
		if c.Type == "Programmed" {
			if (c.Status == metav1.ConditionTrue) != l.Programmed {
				t.Fatalf("condition %+v disagrees with Programmed %v", c, l.Programmed)
			}
			return l.Programmed, c.Message
		}
	}
	t.Fatal("no Programmed condition")
	return false, ""
}

// The edge serves one certificate per host, set only by the namespace
// that holds the host: a neighbour's listener, older or not, is refused
// and marked not programmed; a reconcile with nothing new calls nothing;
// the holder's listener going removes its certificate, and the neighbour
// still cannot set one.
func TestHostCertificatesFollowTheHolder(t *testing.T) {
	ctx := context.Background()
	ca, err := testca.New("test")
	if err != nil {
		t.Fatal(err)
	}
	const host = "shop.example"
	edge := &certEdge{holder: map[string]string{host: edgeapi.Owner("c", "owner")}, stored: map[string]string{}}
	r := &Reconciler{Certificates: &edgeapi.HostCertificates{API: edge}, ClusterID: "c"}
	neighbourGW, neighbour := httpsGateway("neighbour", host, issue(t, ca, host))
	ownerGW, owner := httpsGateway("owner", host, issue(t, ca, host))
	evaluate := func(gws ...*gwv1.Gateway) model.Gateways {
		out := model.Gateways{}
		for _, gw := range gws {
			src := neighbour
			if gw == ownerGW {
				src = owner
			}
			ls := append([]model.Listener(nil), src.Listeners...)
			ls[0].Conditions = append([]metav1.Condition(nil), ls[0].Conditions...)
			out[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}] = model.Evaluated{Gateway: gw, Listeners: ls}
		}
		return out
	}

	// The neighbour's Gateway is the older: tried first, refused.
	ev := evaluate(neighbourGW, ownerGW)
	soon, err := r.hostCertificates(ctx, []*gwv1.Gateway{neighbourGW, ownerGW}, ev, true)
	if err != nil || soon {
		t.Fatalf("soon %v, err %v", soon, err)
	}
	if want := []string{"PUT shop.example c/neighbour", "PUT shop.example c/owner"}; strings.Join(edge.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v, want %v", edge.calls, want)
	}
	if edge.stored[host] != "c/owner" {
		t.Fatalf("stored %v", edge.stored)
	}
	if ok, _ := programmed(t, ev, "owner"); !ok {
		t.Fatal("the holder's listener is not programmed")
	}
	ok, msg := programmed(t, ev, "neighbour")
	if ok || !strings.Contains(msg, "served with the certificate of Gateway owner/gw") {
		t.Fatalf("neighbour programmed %v: %s", ok, msg)
	}

	// Nothing changed: no call.
	edge.calls = nil
	if _, err := r.hostCertificates(ctx, []*gwv1.Gateway{neighbourGW, ownerGW}, evaluate(neighbourGW, ownerGW), true); err != nil || len(edge.calls) != 0 {
		t.Fatalf("calls %v, err %v", edge.calls, err)
	}

	// The holder's Gateway goes: its certificate is removed; the
	// neighbour's is refused, naming the holder.
	edge.calls = nil
	ev = evaluate(neighbourGW)
	if _, err := r.hostCertificates(ctx, []*gwv1.Gateway{neighbourGW}, ev, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := edge.stored[host]; ok {
		t.Fatalf("the holder's certificate stayed: %v", edge.stored)
	}
	if want := []string{"DELETE shop.example c/owner", "PUT shop.example c/neighbour"}; strings.Join(edge.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v, want %v", edge.calls, want)
	}
	ok, msg = programmed(t, ev, "neighbour")
	if ok || !strings.Contains(msg, "held on the edge by namespace owner") {
		t.Fatalf("neighbour programmed %v: %s", ok, msg)
	}
}

// A host nobody holds yet (its key is being issued) is tried again soon,
// without marking the listener; a certificate not for the host is never
// sent, and its listener says so; an edge without HTTPS is sent nothing.
func TestHostCertificatesPendingAndWrongName(t *testing.T) {
	ctx := context.Background()
	ca, err := testca.New("test")
	if err != nil {
		t.Fatal(err)
	}
	edge := &certEdge{holder: map[string]string{"other.example": "c/a"}, stored: map[string]string{}}
	r := &Reconciler{Certificates: &edgeapi.HostCertificates{API: edge}, ClusterID: "c"}
	gw, ev := httpsGateway("a", "new.example", issue(t, ca, "new.example"))
	evs := model.Gateways{types.NamespacedName{Namespace: "a", Name: "gw"}: ev}
	if _, err := r.hostCertificates(ctx, []*gwv1.Gateway{gw}, evs, false); err != nil || len(edge.calls) != 0 {
		t.Fatalf("an edge without HTTPS was called: %v, %v", edge.calls, err)
	}
	soon, err := r.hostCertificates(ctx, []*gwv1.Gateway{gw}, evs, true)
	if err != nil || !soon {
		t.Fatalf("soon %v, err %v", soon, err)
	}
	if ok, _ := programmed(t, evs, "a"); !ok {
		t.Fatal("a listener whose host is being published was marked")
	}

	edge.calls = nil
	gw, ev = httpsGateway("a", "other.example", issue(t, ca, "wrong.example"))
	evs = model.Gateways{types.NamespacedName{Namespace: "a", Name: "gw"}: ev}
	if _, err := r.hostCertificates(ctx, []*gwv1.Gateway{gw}, evs, true); err != nil || len(edge.calls) != 0 {
		t.Fatalf("calls %v, err %v", edge.calls, err)
	}
	ok, msg := programmed(t, evs, "a")
	if ok || !strings.Contains(msg, "no certificate of its certificateRefs is for host other.example") {
		t.Fatalf("programmed %v: %s", ok, msg)
	}
}
