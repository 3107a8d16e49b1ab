package server_test

import (
	"context"
	"net/http"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// TestUnroutedHostAnswers: a host without a live tunnel answers 502 while a
// key or a reservation serves it and 404 otherwise, and the answer follows
// keys and domains as the API creates and deletes them.
func TestUnroutedHostAnswers(t *testing.T) {
	e := startEdge(t, t.TempDir())
	ctx := context.Background()
	api := e.client(e.writeKey)
	var keyID string
	steps := []struct {
		name string
		do   func() error
		want map[string]int
	}{
		{"nothing created", func() error { return nil }, map[string]int{
			"app." + baseDomain: http.StatusNotFound, "res." + baseDomain: http.StatusNotFound,
		}},
		{"key for app", func() error {
			k, err := api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "app"})
			if err == nil {
				keyID = k.ID
			}
			return err
		}, map[string]int{"app." + baseDomain: http.StatusBadGateway, "other." + baseDomain: http.StatusNotFound}},
		{"reserved subdomain", func() error {
			_, err := api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "res"})
			return err
		}, map[string]int{"res." + baseDomain: http.StatusBadGateway, "RES." + baseDomain: http.StatusBadGateway}},
		{"key revoked", func() error { return api.RevokeTunnelKey(ctx, keyID) },
			map[string]int{"app." + baseDomain: http.StatusNotFound, "res." + baseDomain: http.StatusBadGateway}},
		{"domain released", func() error { return api.DeleteDomain(ctx, "res."+baseDomain, "") },
			map[string]int{"res." + baseDomain: http.StatusNotFound}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for host, want := range st.want {
			if code, body, _ := e.get(t, host, "/", nil); code != want {
				t.Errorf("%s: GET %s = %d %q, want %d", st.name, host, code, body, want)
			}
		}
	}
}
