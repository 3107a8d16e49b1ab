package edgeapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

// recordingCerts answers every call with err and counts the calls.
type recordingCerts struct {
	puts, deletes int
	err           error
}

func (r *recordingCerts) PutCertificate(context.Context, string, string, apiwire.PutCertificate) (*apiwire.Certificate, error) {
	r.puts++
	return &apiwire.Certificate{}, r.err
}

func (r *recordingCerts) DeleteCertificate(context.Context, string, string) error {
	r.deletes++
	return r.err
}

// A certificate set once is not sent again until it or its owner
// changes; a refused one is not remembered; removal forgets a host when
// the edge no longer has the certificate or the host is another's, and
// keeps it when the edge could not answer.
func TestHostCertificates(t *testing.T) {
	ctx := context.Background()
	api := &recordingCerts{}
	h := &edgeapi.HostCertificates{API: api}
	cert, key := []byte("chain"), []byte("key")
	for range 2 {
		if err := h.Put(ctx, "a.example", "c/a", cert, key); err != nil {
			t.Fatal(err)
		}
	}
	if api.puts != 1 || !h.Holds("a.example", "c/a", cert, key) || h.Owner("a.example") != "c/a" {
		t.Fatalf("puts %d, owner %q", api.puts, h.Owner("a.example"))
	}
	if err := h.Put(ctx, "a.example", "c/a", []byte("renewed"), key); err != nil || api.puts != 2 {
		t.Fatalf("a renewed certificate is not sent: puts %d, err %v", api.puts, err)
	}
	api.err = &apiwire.APIError{Status: http.StatusForbidden, Code: apiwire.CodeAddressOwned}
	if err := h.Put(ctx, "b.example", "c/b", cert, key); apiwire.CodeOf(err) != apiwire.CodeAddressOwned || h.Owner("b.example") != "" {
		t.Fatalf("a refusal: err %v, owner %q", err, h.Owner("b.example"))
	}

	if err := h.Remove(ctx, "b.example"); err != nil || api.deletes != 0 {
		t.Fatalf("a host never set was removed: deletes %d, err %v", api.deletes, err)
	}
	api.err = errors.New("connection refused")
	if err := h.Remove(ctx, "a.example"); err == nil || h.Owner("a.example") != "c/a" {
		t.Fatalf("a removal the edge did not answer: err %v, owner %q", err, h.Owner("a.example"))
	}
	for _, code := range []string{apiwire.CodeNotFound, apiwire.CodeAddressOwned} {
		api.err = nil
		if err := h.Put(ctx, "a.example", "c/a", cert, key); err != nil {
			t.Fatal(err)
		}
		api.err = &apiwire.APIError{Status: http.StatusNotFound, Code: code}
		if err := h.Remove(ctx, "a.example"); err != nil || h.Owner("a.example") != "" || len(h.Hosts()) != 0 {
			t.Fatalf("%s: err %v, hosts %v", code, err, h.Hosts())
		}
	}
}
