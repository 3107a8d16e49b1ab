package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
)

// echo answers with what the backend saw.
func echo(w http.ResponseWriter, r *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]string{
		"host":   r.Host,
		"xff":    strings.Join(r.Header.Values("X-Forwarded-For"), ","),
		"xfh":    strings.Join(r.Header.Values("X-Forwarded-Host"), ","),
		"xfp":    strings.Join(r.Header.Values("X-Forwarded-Proto"), ","),
		"remote": r.RemoteAddr,
		"path":   r.URL.Path,
	})
}

func TestHTTPTunnelRevocation(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "app", Labels: map[string]string{"cluster": "c1"}})
	if tk.Address != "app."+baseDomain || !strings.HasPrefix(tk.Key, "tunt_") {
		t.Fatalf("tunnel key = %+v", tk)
	}
	s := e.mustDial(t, tk.Key)
	reply := bind(t, s, protocol.BindRequest{Protocol: "http", Subdomain: "app"})
	_, port, _ := strings.Cut(e.HTTPAddr(), ":")
	if want := "http://app." + baseDomain + ":" + port; reply.URL != want {
		t.Fatalf("URL = %q, want %q", reply.URL, want)
	}
	serveHTTP(t, s, http.HandlerFunc(echo))

	code, body, _ := e.get(t, "App.Tuna.Localhost:"+port, "/hello", http.Header{
		"X-Forwarded-For":   {"6.6.6.6"},
		"X-Forwarded-Host":  {"evil.example"},
		"X-Forwarded-Proto": {"https"},
	})
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if got["xff"] != "127.0.0.1" || got["xfh"] != "App.Tuna.Localhost:"+port || got["xfp"] != "http" {
		t.Errorf("forwarded headers not overwritten: %+v", got)
	}
	if got["host"] != "App.Tuna.Localhost:"+port || got["path"] != "/hello" {
		t.Errorf("host/path = %+v", got)
	}
	if !strings.HasPrefix(got["remote"], "127.0.0.1:") {
		t.Errorf("backend RemoteAddr = %q, want the public client's", got["remote"])
	}

	live, err := e.client(e.writeKey).GetTunnelKey(ctx, tk.ID)
	if err != nil || live.Session == nil || live.Session.URL != reply.URL || live.Session.ID != reply.SessionID {
		t.Fatalf("GET tunnel key = %+v, %v", live, err)
	}

	if err := e.client(e.writeKey).RevokeTunnelKey(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	te := asTerminated(waitDone(t, s))
	if te == nil || te.Code != protocol.CodeKeyRevoked {
		t.Fatalf("Err() = %v, want TerminatedError key_revoked", s.Err())
	}
	if code, body, _ := e.get(t, "app."+baseDomain, "/", nil); code != http.StatusNotFound {
		t.Fatalf("after revocation: %d %s", code, body)
	}
	if _, err := e.dial(t, tk.Key); err == nil || !strings.Contains(err.Error(), "invalid or revoked") {
		t.Fatalf("revoked key dial: %v", err)
	}
}
