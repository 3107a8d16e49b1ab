package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// Deleting a reserved domain ends the session that serves it: a reservation
// that is gone must not keep publishing anything.
func TestDeletingDomainEndsItsSession(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	d, err := e.client(e.writeKey).CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "shop"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	serveHTTP(t, s, http.HandlerFunc(hello))
	if code, body, _ := e.get(t, d.Name, "/", nil); code != 200 || body != "hello from the agent" {
		t.Fatalf("before deletion: %d %q", code, body)
	}
	if err := e.client(e.writeKey).DeleteDomain(ctx, d.Name, ""); err != nil {
		t.Fatal(err)
	}
	te := asTerminated(waitDone(t, s))
	if te == nil || te.Code != protocol.CodeAddressNotFound || !strings.Contains(te.Reason, "deleted") {
		t.Fatalf("session ended with %v; want address_not_found saying the domain was deleted", s.Err())
	}
	if code, _, _ := e.get(t, d.Name, "/", nil); code == 200 {
		t.Fatal("the deleted domain still answers from the tunnel")
	}
}
