package app

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// The controller's transport trusts the edge API as its flags say, and bad
// flags fail at start with a message that names them.
func TestEdgeTransport(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	fp := apiwire.Fingerprint(srv.Certificate().Raw)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(o ControllerOptions) error {
		tr, err := edgeTransport(o)
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(o.EdgeAPIURL)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for name, o := range map[string]ControllerOptions{
		"pin":     {EdgeAPIURL: srv.URL, EdgeAPIFingerprint: fp},
		"CA file": {EdgeAPIURL: srv.URL, EdgeAPICAFile: caFile},
	} {
		if err := get(o); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		o    ControllerOptions
		want string
	}{
		"no pin, self-signed": {ControllerOptions{EdgeAPIURL: srv.URL}, "certificate"},
		"wrong pin":           {ControllerOptions{EdgeAPIURL: srv.URL, EdgeAPIFingerprint: apiwire.Fingerprint([]byte("x"))}, fp},
		"malformed pin":       {ControllerOptions{EdgeAPIURL: srv.URL, EdgeAPIFingerprint: "abc"}, "--edge-api-fingerprint"},
		"missing CA file":     {ControllerOptions{EdgeAPIURL: srv.URL, EdgeAPICAFile: caFile + ".missing"}, "--edge-api-ca-file"},
		"pin on http://":      {ControllerOptions{EdgeAPIURL: "http://127.0.0.1:1", EdgeAPIFingerprint: fp}, "use https://"},
		"not a URL":           {ControllerOptions{EdgeAPIURL: "edge:8443"}, "--edge-api-url"},
	} {
		if err := get(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
