package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// wantRefused checks a refusal by its status, code and a part of its
// message.
func wantRefused(t *testing.T, err error, status int, code, mentions string) {
	t.Helper()
	var ae *apiwire.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code || !strings.Contains(ae.Message, mentions) {
		t.Fatalf("error = %v, want %d %s mentioning %q", err, status, code, mentions)
	}
}

// A release or change of an owned reservation checks the owner, as create
// and bind do: a tunnels:write key releases or changes it only for the
// owner it names; a foreign owner, or none, gets 403 address_owned naming
// the owner; a full key may override.
func TestWritesToReservationsCheckTheOwner(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	w, admin := f.c(f.write), f.c(f.full)
	for _, sub := range []string{"shop", "kept", "gone"} {
		if _, err := w.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: sub, Sharing: apiwire.Sharing{Owner: ownerA}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg", Sharing: apiwire.Sharing{Owner: ownerA}}); err != nil {
		t.Fatal(err)
	}
	shop := "shop." + base
	for _, as := range []string{ownerB, ""} {
		wantOwned(t, w.DeleteDomain(ctx, shop, as), ownerA)
		_, err := w.ShareDomain(ctx, shop, as, []string{ownerB})
		wantOwned(t, err, ownerA)
		wantOwned(t, w.DeleteTCPEndpoint(ctx, "pg", as), ownerA)
		_, err = w.ShareTCPEndpoint(ctx, "pg", as, []string{ownerB})
		wantOwned(t, err, ownerA)
	}
	wantRefused(t, w.DeleteDomain(ctx, shop, ownerB), http.StatusForbidden, apiwire.CodeAddressOwned,
		"only its owner may change or release it")
	if d, err := w.GetDomain(ctx, shop); err != nil || len(d.SharedWith) != 0 {
		t.Fatalf("a refused write changed the domain: %+v %v", d, err)
	}
	if _, err := w.GetTCPEndpoint(ctx, "pg"); err != nil {
		t.Fatalf("a refused release released the endpoint: %v", err)
	}

	// The owner itself.
	if _, err := w.ShareDomain(ctx, shop, ownerA, []string{ownerB}); err != nil {
		t.Fatalf("the owner shares: %v", err)
	}
	if err := w.DeleteDomain(ctx, shop, ownerA); err != nil {
		t.Fatalf("the owner releases: %v", err)
	}
	if err := w.DeleteTCPEndpoint(ctx, "pg", ownerA); err != nil {
		t.Fatalf("the owner releases its endpoint: %v", err)
	}
	// The edge's administrator overrides, with or without an owner.
	if err := admin.DeleteDomain(ctx, "kept."+base, ""); err != nil {
		t.Fatalf("a full key overrides the owner: %v", err)
	}
	if err := admin.DeleteDomain(ctx, "gone."+base, ownerB); err != nil {
		t.Fatalf("a full key overrides the owner it names: %v", err)
	}
	// An unowned reservation is anyone's, as before owners existed.
	if _, err := w.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "open"}); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteDomain(ctx, "open."+base, ""); err != nil {
		t.Fatalf("an unowned domain: %v", err)
	}
}

// The DNS check of a custom domain may be run by whoever may use it.
func TestVerifyChecksTheOwner(t *testing.T) {
	f := newFixture(t, "127.0.0.1:1")
	ctx := context.Background()
	w := f.c(f.write)
	d, err := w.CreateDomain(ctx, apiwire.CreateDomain{Domain: "api.example.org",
		Sharing: apiwire.Sharing{Owner: ownerA, SharedWith: []string{"cluster-1/friend"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.VerifyDomain(ctx, d.Name, ownerB)
	wantOwned(t, err, ownerA)
	for _, as := range []string{ownerA, "cluster-1/friend"} {
		if _, err := w.VerifyDomain(ctx, d.Name, as); err != nil {
			t.Fatalf("verify as %s: %v", as, err)
		}
	}
}

// A key bound to an owner prefix (a cluster id) acts only for the owners
// under it: it cannot pose as another cluster on create, nor release,
// change, list, renew or revoke what another cluster holds.
func TestKeyBoundToAnOwnerPrefix(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	admin := f.c(f.full)
	k, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "cluster-1", Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: "cluster-1"})
	if err != nil || k.OwnerPrefix != "cluster-1" {
		t.Fatalf("bound key: %+v %v", k, err)
	}
	bound := f.c(k.Key)
	if who, err := bound.WhoAmI(ctx); err != nil || who.OwnerPrefix != "cluster-1" {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	// Another cluster's reservations and keys, made by the administrator.
	if _, err := admin.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "theirs", Sharing: apiwire.Sharing{Owner: "cluster-2/shop"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "byhand"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "their-pg", Sharing: apiwire.Sharing{Owner: "cluster-2/shop"}}); err != nil {
		t.Fatal(err)
	}
	theirKey, err := admin.CreateTunnelKey(ctx, key("http", "theirs", "cluster-2/shop"))
	if err != nil {
		t.Fatal(err)
	}

	const posing = "is bound to owner prefix \"cluster-1\""
	for _, owner := range []string{"cluster-2/shop", "cluster-10/shop", "cluster-1x"} {
		_, err := bound.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "mine", Sharing: apiwire.Sharing{Owner: owner}})
		wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, posing)
		_, err = bound.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "mine", Sharing: apiwire.Sharing{Owner: owner}})
		wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, posing)
		_, err = bound.CreateTunnelKey(ctx, key("http", "mine", owner))
		wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, posing)
		wantRefused(t, bound.DeleteDomain(ctx, "theirs."+base, owner), http.StatusForbidden, apiwire.CodeForbidden, posing)
	}
	_, err = bound.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "mine"})
	wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, "name an owner under it")
	_, err = bound.CreateTunnelKey(ctx, key("http", "", ""))
	wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, "name an owner under it")

	wantOwned(t, bound.DeleteDomain(ctx, "theirs."+base, ""), "cluster-2/shop")
	_, err = bound.ShareDomain(ctx, "theirs."+base, "", []string{"cluster-1/demo"})
	wantOwned(t, err, "cluster-2/shop")
	wantOwned(t, bound.DeleteTCPEndpoint(ctx, "their-pg", ""), "cluster-2/shop")
	wantRefused(t, bound.DeleteDomain(ctx, "byhand."+base, ""), http.StatusForbidden, apiwire.CodeForbidden, "has no owner")

	// Keys of other owners do not exist for it.
	wantCode(t, bound.RevokeTunnelKey(ctx, theirKey.ID), apiwire.CodeNotFound)
	_, err = bound.RenewTunnelKey(ctx, theirKey.ID)
	wantCode(t, err, apiwire.CodeNotFound)
	_, err = bound.GetTunnelKey(ctx, theirKey.ID)
	wantCode(t, err, apiwire.CodeNotFound)
	if _, err := admin.GetTunnelKey(ctx, theirKey.ID); err != nil {
		t.Fatalf("the refused revocation revoked: %v", err)
	}

	// Its own cluster's owners: everything works.
	if _, err := bound.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "mine", Sharing: apiwire.Sharing{Owner: "cluster-1/demo"}}); err != nil {
		t.Fatalf("reserve for its own cluster: %v", err)
	}
	mine, err := bound.CreateTunnelKey(ctx, key("http", "mine", "cluster-1/demo"))
	if err != nil {
		t.Fatalf("a key for its own cluster: %v", err)
	}
	list, err := bound.ListTunnelKeys(ctx, nil)
	if err != nil || len(list) != 1 || list[0].ID != mine.ID {
		t.Fatalf("a bound key lists only its owners' keys: %+v %v", list, err)
	}
	if _, err := bound.ShareDomain(ctx, "mine."+base, "", []string{"cluster-1/other"}); err != nil {
		t.Fatalf("share within its cluster: %v", err)
	}
	wantOwned(t, bound.DeleteDomain(ctx, "mine."+base, "cluster-1/other"), "cluster-1/demo")
	if err := bound.RevokeTunnelKey(ctx, mine.ID); err != nil {
		t.Fatal(err)
	}
	if err := bound.DeleteDomain(ctx, "mine."+base, "cluster-1/demo"); err != nil {
		t.Fatalf("release its own: %v", err)
	}
}

// Only a tunnels:write key may be bound, and a full key never is: it
// manages API keys, so binding it would bind nothing.
func TestOwnerPrefixValidation(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		name, body, mentions string
	}{
		{"full", `{"scopes":["full"],"owner_prefix":"c1"}`, "cannot be bound"},
		{"write and full", `{"scopes":["tunnels:write","full"],"owner_prefix":"c1"}`, "cannot be bound"},
		{"without tunnels:write", `{"scopes":["secrets:read"],"owner_prefix":"c1"}`, "needs scope"},
		{"trailing slash", `{"scopes":["tunnels:write"],"owner_prefix":"c1/"}`, "without the trailing /"},
		{"space", `{"scopes":["tunnels:write"],"owner_prefix":"c 1"}`, "printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := f.raw(t, f.full, "POST", "/v1/api-keys", tc.body)
			if status != 400 || !strings.Contains(body["error"], tc.mentions) {
				t.Fatalf("%s = %d %v, want 400 mentioning %q", tc.body, status, body, tc.mentions)
			}
		})
	}
}

// The edge's administrator hands a lost cluster's addresses to the new
// cluster: owners and shared_with entries under the old prefix move, and
// the new cluster's bound key may then manage them; keys of the old
// owners may no longer use them.
func TestOwnerTransfer(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	admin, w := f.c(f.full), f.c(f.write)
	if _, err := w.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "shop",
		Sharing: apiwire.Sharing{Owner: "old/shop", SharedWith: []string{"old/dev", "third/x"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "other", Sharing: apiwire.Sharing{Owner: "third/x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: "pg", Sharing: apiwire.Sharing{Owner: "old/db"}}); err != nil {
		t.Fatal(err)
	}
	oldKey, err := w.CreateTunnelKey(ctx, key("http", "cart", "old/shop")) // claims cart
	if err != nil {
		t.Fatal(err)
	}

	_, err = w.TransferOwners(ctx, "old", "new")
	wantRefused(t, err, http.StatusForbidden, apiwire.CodeForbidden, "managing API keys needs")
	_, err = admin.TransferOwners(ctx, "old", "old/x")
	wantRefused(t, err, http.StatusBadRequest, apiwire.CodeInvalidRequest, "overlap")

	res, err := admin.TransferOwners(ctx, "old", "new")
	if err != nil {
		t.Fatal(err)
	}
	who, err := admin.WhoAmI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The audit line: who asked, what moved.
	for _, want := range []string{`msg="audit: owner transfer"`, "from=old", "to=new", "api_key=" + who.KeyID,
		"domains=[shop." + base + "]", "tcp_endpoints=[pg]", "claims=[cart." + base + "]", "complete=true"} {
		if !strings.Contains(f.logs.String(), want) {
			t.Errorf("the audit line lacks %s:\n%s", want, f.logs.String())
		}
	}
	if strings.Join(res.Domains, ",") != "shop."+base || strings.Join(res.TCPEndpoints, ",") != "pg" ||
		strings.Join(res.Claims, ",") != "cart."+base {
		t.Fatalf("transfer moved %+v", res)
	}
	d, err := w.GetDomain(ctx, "shop."+base)
	if err != nil || d.Owner != "new/shop" || strings.Join(d.SharedWith, ",") != "new/dev,third/x" {
		t.Fatalf("after the transfer: %+v %v", d, err)
	}
	if o, _ := w.GetDomain(ctx, "other."+base); o.Owner != "third/x" {
		t.Fatalf("a third owner's domain moved: %+v", o)
	}
	// The old owner's keys lose the addresses; the new owner gets them.
	_, err = w.CreateTunnelKey(ctx, key("http", "cart", "old/shop"))
	wantOwned(t, err, "new/shop")
	_, err = w.CreateTunnelKey(ctx, key("http", "shop", "old/shop"))
	wantOwned(t, err, "new/shop")
	if _, err := w.CreateTunnelKey(ctx, key("http", "cart", "new/shop")); err != nil {
		t.Fatalf("the new owner's key for the moved claim: %v", err)
	}
	if _, err := admin.GetTunnelKey(ctx, oldKey.ID); err != nil {
		t.Fatalf("a transfer revokes no key: %v", err)
	}
	newKey, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c(newKey.Key).DeleteTCPEndpoint(ctx, "pg", "new/db"); err != nil {
		t.Fatalf("the new cluster manages what moved: %v", err)
	}
	// Run again: nothing left to move.
	if again, err := admin.TransferOwners(ctx, "old", "new"); err != nil || len(again.Domains)+len(again.TCPEndpoints)+len(again.Claims) != 0 {
		t.Fatalf("a second transfer: %+v %v", again, err)
	}
}
