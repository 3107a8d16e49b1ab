package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

func TestMetrics(t *testing.T) {
	e := startEdge(t, t.TempDir())
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "m"})
	_, _ = s.Bind(t.Context(), protocol.BindRequest{Protocol: "tcp", Alias: "x"}) // refused: forbidden
	serveHTTP(t, s, http.HandlerFunc(hello))
	if code, _, _ := e.get(t, "m."+baseDomain, "/", nil); code != 200 {
		t.Fatal(code)
	}
	e.get(t, "nope."+baseDomain, "/", nil)

	resp, err := e.apiHTTP(t).Get(e.APIURL() + "/metrics") // no auth needed
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		"tuna_edge_sessions 1",
		`tuna_edge_binds_total{protocol="http",result="ok"} 1`,
		`tuna_edge_binds_total{protocol="tcp",result="forbidden"} 1`,
		`tuna_edge_http_requests_total{code="200"} 1`,
		`tuna_edge_http_requests_total{code="404"} 1`,
		`tuna_edge_public_connections_total{protocol="http"} 1`,
		`tuna_edge_api_requests_total{code="201",route="POST /v1/tunnel-keys"} 1`,
		`tuna_edge_bytes_total{direction="out"}`,
		// Every limit is exported before it is ever hit.
		`tuna_edge_limit_refusals_total{limit="handshakes"} 0`,
		`tuna_edge_limit_refusals_total{limit="sessions_per_key"} 0`,
		`tuna_edge_limit_refusals_total{limit="binds_per_session"} 0`,
		`tuna_edge_limit_refusals_total{limit="channels_per_session"} 0`,
		`tuna_edge_limit_refusals_total{limit="connections_per_tunnel"} 0`,
		`tuna_edge_limit_refusals_total{limit="secrets"} 0`,
		"tuna_edge_secrets 0",
		"tuna_edge_secret_watches 0",
		"tuna_edge_public_in_flight 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "m."+baseDomain) || strings.Contains(text, "127.0.0.1") {
		t.Error("metrics carry hosts or client addresses as labels")
	}
}
