package api_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

const (
	ownerA = "cluster-1/demo"
	ownerB = "cluster-1/attacker"
)

// wantOwned checks an address_owned refusal that names the owner.
func wantOwned(t *testing.T, err error, owner string) {
	t.Helper()
	got, ok := apiwire.OwnerOf(err)
	var ae *apiwire.APIError
	if !ok || got != owner || !strings.Contains(err.Error(), owner) || !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("error = %v, want 403 address_owned naming %s", err, owner)
	}
}

func key(proto, addr, owner string) apiwire.CreateTunnelKey {
	return apiwire.CreateTunnelKey{Protocol: proto, Address: addr, Owner: owner}
}

func TestOwnedDomainRefusesOtherOwners(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	d, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop", Sharing: apiwire.Sharing{Owner: ownerA}})
	if err != nil || d.Owner != ownerA {
		t.Fatalf("reserve: %+v %v", d, err)
	}
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "open"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTunnelKey(ctx, key("http", "shop", ownerA)); err != nil {
		t.Fatalf("owner's key: %v", err)
	}
	for _, addr := range []string{"shop", "shop." + base} {
		_, err := c.CreateTunnelKey(ctx, key("http", addr, ownerB))
		wantOwned(t, err, ownerA)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "shop", ""))
	wantOwned(t, err, ownerA)
	// A reservation made without an owner stays open to everyone.
	for _, o := range []string{ownerA, ownerB, ""} {
		if _, err := c.CreateTunnelKey(ctx, key("http", "open", o)); err != nil {
			t.Fatalf("unowned domain, owner %q: %v", o, err)
		}
	}
	// The unowned reservation made no claim either.
	claims, err := f.st.ListClaims()
	if err != nil || len(claims) != 0 {
		t.Fatalf("claims: %+v %v", claims, err)
	}
}

func TestSharedDomain(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop", Sharing: apiwire.Sharing{Owner: ownerA}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateTunnelKey(ctx, key("http", "shop", ownerB))
	wantOwned(t, err, ownerA)
	d, err := c.ShareDomain(ctx, "shop."+base, ownerA, []string{ownerB, ownerB})
	if err != nil || len(d.SharedWith) != 1 || d.SharedWith[0] != ownerB {
		t.Fatalf("share: %+v %v", d, err)
	}
	if got, _ := c.GetDomain(ctx, "shop."+base); len(got.SharedWith) != 1 {
		t.Fatalf("shared_with not stored: %+v", got)
	}
	if _, err := c.CreateTunnelKey(ctx, key("http", "shop", ownerB)); err != nil {
		t.Fatalf("shared key: %v", err)
	}
	if _, err := c.CreateTunnelKey(ctx, key("http", "shop", "cluster-1/third")); apiwire.CodeOf(err) != apiwire.CodeAddressOwned {
		t.Fatalf("a third owner: %v", err)
	}
	if _, err := c.ShareDomain(ctx, "shop."+base, ownerA, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "shop", ownerB))
	wantOwned(t, err, ownerA)
}

func TestSharingValidation(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "open"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "mine", Sharing: apiwire.Sharing{Owner: ownerA}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"shared_with missing", "PATCH", "/v1/domains/mine." + base, `{}`, 400},
		{"shared_with null", "PATCH", "/v1/domains/mine." + base, `{"shared_with":null}`, 400},
		{"owner with a space", "PATCH", "/v1/domains/mine." + base, `{"shared_with":["a b"]}`, 400},
		{"unknown field", "PATCH", "/v1/domains/mine." + base, `{"shared_with":[],"owner":"x"}`, 400},
		{"unowned reservation", "PATCH", "/v1/domains/open." + base, `{"shared_with":["x/y"]}`, 409},
		{"missing domain", "PATCH", "/v1/domains/nope." + base, `{"shared_with":[]}`, 404},
		{"missing endpoint", "PATCH", "/v1/tcp-endpoints/nope", `{"shared_with":[]}`, 404},
		{"sharing without an owner", "POST", "/v1/domains", `{"subdomain":"x","shared_with":["x/y"]}`, 400},
		{"owner too long", "POST", "/v1/tunnel-keys", `{"protocol":"http","owner":"` + strings.Repeat("o", 254) + `"}`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := f.raw(t, f.write, tc.method, tc.path, tc.body)
			if status != tc.status || body["error"] == "" {
				t.Fatalf("%s %s %s = %d %v, want %d", tc.method, tc.path, tc.body, status, body, tc.status)
			}
		})
	}
}

func TestBareSubdomainClaim(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	k1, err := c.CreateTunnelKey(ctx, key("http", "cart", ownerA))
	if err != nil || k1.Owner != ownerA {
		t.Fatalf("first key: %+v %v", k1, err)
	}
	k2, err := c.CreateTunnelKey(ctx, key("http", "cart."+base, ownerA))
	if err != nil {
		t.Fatalf("second key of the same owner: %v", err)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "cart", ownerB))
	wantOwned(t, err, ownerA)
	_, err = c.CreateTunnelKey(ctx, key("http", "cart", ""))
	wantOwned(t, err, ownerA)
	// Reserving the claimed name for another owner would take it too.
	_, err = c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "cart", Sharing: apiwire.Sharing{Owner: ownerB}})
	wantOwned(t, err, ownerA)

	if err := c.RevokeTunnelKey(ctx, k1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "cart", ownerB))
	wantOwned(t, err, ownerA) // k2 still holds the claim
	if err := c.RevokeTunnelKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	kb, err := c.CreateTunnelKey(ctx, key("http", "cart", ownerB))
	if err != nil {
		t.Fatalf("after the claimant's last key went: %v", err)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "cart", ownerA))
	wantOwned(t, err, ownerB)
	claims, err := f.st.ListClaims()
	if err != nil || len(claims) != 1 || claims[0].Owner != ownerB || claims[0].Address != "cart."+base {
		t.Fatalf("claims: %+v %v", claims, err)
	}
	// The claimant may reserve its own address.
	if _, err := c.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "cart", Sharing: apiwire.Sharing{Owner: ownerB}}); err != nil {
		t.Fatalf("claimant reserves: %v", err)
	}
	if err := c.RevokeTunnelKey(ctx, kb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTunnelKey(ctx, key("http", "cart", ownerA))
	wantOwned(t, err, ownerB) // the reservation holds it now
}

func TestOwnedTCPEndpoint(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	ep, err := c.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg", Sharing: apiwire.Sharing{Owner: ownerA}})
	if err != nil || ep.Owner != ownerA {
		t.Fatalf("reserve: %+v %v", ep, err)
	}
	port := strconv.Itoa(ep.Port)
	for _, addr := range []string{"pg", port} {
		if _, err := c.CreateTunnelKey(ctx, key("tcp", addr, ownerA)); err != nil {
			t.Fatalf("owner's key for %s: %v", addr, err)
		}
		_, err := c.CreateTunnelKey(ctx, key("tcp", addr, ownerB))
		wantOwned(t, err, ownerA)
	}
	if _, err := c.ShareTCPEndpoint(ctx, "pg", ownerA, []string{ownerB}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTunnelKey(ctx, key("tcp", port, ownerB)); err != nil {
		t.Fatalf("shared port: %v", err)
	}
}
