package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	edgeaccess "code.tuna.am/tuna/k8s-operator/edge/internal/access"
	"code.tuna.am/tuna/k8s-operator/edge/internal/certs"
	"code.tuna.am/tuna/k8s-operator/edge/internal/secrets"
	"code.tuna.am/tuna/k8s-operator/edge/internal/store"
)

// Every route is described in openapi.json, and every described operation
// is a route: the document cannot drift from the server.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ring, err := secrets.NewKeyring([][]byte{make([]byte, secrets.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := secrets.Open(st, ring, secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keeper, _, err := edgeaccess.Open(st, ring, edgeaccess.New(edgeaccess.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	certificates, err := certs.New(certs.Config{Store: st, Seal: ring})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Secrets: m, Access: keeper, Certificates: certificates}, st, nil, nil)

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, p := range s.Patterns() {
		if p == "/" {
			continue
		}
		served = append(served, strings.ReplaceAll(p, "...}", "}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.json describes %s, which is not a route", r)
		}
	}
}
