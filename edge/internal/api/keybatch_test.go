package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// A batch issues each key as its own call would: a refused item (an
// address another owner holds, an owner outside a bound key's prefix, a
// bad protocol) answers that item's refusal and leaves the others issued,
// each with its secret. A batch renewal renews each key, and a key the
// caller may not see, or that does not exist, is not found by itself.
func TestBatchIssueAndRenew(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	admin := f.c(f.full)
	k, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Scopes: []string{apiwire.ScopeWrite}, OwnerPrefix: "cluster-1"})
	if err != nil {
		t.Fatal(err)
	}
	bound := f.c(k.Key)
	if _, err := admin.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "theirs", Sharing: apiwire.Sharing{Owner: "cluster-2/shop"}}); err != nil {
		t.Fatal(err)
	}
	theirKey, err := admin.CreateTunnelKey(ctx, key("http", "theirs", "cluster-2/shop"))
	if err != nil {
		t.Fatal(err)
	}
	items := []apiwire.CreateTunnelKey{
		key("http", "mine-0", "cluster-1/demo"),
		key("http", "theirs", "cluster-1/demo"),
		key("http", "mine-1", "cluster-2/shop"),
		key("udp", "mine-2", "cluster-1/demo"),
		key("http", "mine-3", "cluster-1/demo"),
	}
	res, err := bound.CreateTunnelKeys(ctx, items)
	if err != nil || len(res) != len(items) {
		t.Fatalf("batch: %d results, %v", len(res), err)
	}
	for _, i := range []int{0, 4} {
		r := res[i]
		if r.Err() != nil || r.Status != http.StatusCreated || r.Key.Address != items[i].Address+"."+base ||
			!strings.HasPrefix(r.Key.Key, "tunt_"+r.Key.ID+"_") {
			t.Fatalf("item %d: %+v %v", i, r, r.Err())
		}
	}
	wantOwned(t, res[1].Err(), "cluster-2/shop")
	wantRefused(t, res[2].Err(), http.StatusForbidden, apiwire.CodeForbidden, "is bound to owner prefix")
	wantRefused(t, res[3].Err(), http.StatusBadRequest, apiwire.CodeInvalidRequest, "protocol")
	if rid := res[1].Error.RequestID; !strings.HasPrefix(rid, "req_") {
		t.Errorf("an item's refusal has request id %q", rid)
	}
	list, err := bound.ListTunnelKeys(ctx, nil)
	if err != nil || len(list) != 2 {
		t.Fatalf("after the batch the bound key lists %d keys (%v), want the 2 issued", len(list), err)
	}

	ids := []string{res[0].Key.ID, theirKey.ID, "tk_unknown", res[4].Key.ID}
	renewed, err := bound.RenewTunnelKeys(ctx, ids)
	if err != nil || len(renewed) != len(ids) {
		t.Fatalf("batch renew: %d results, %v", len(renewed), err)
	}
	for _, i := range []int{0, 3} {
		if r := renewed[i]; r.Err() != nil || r.Status != http.StatusOK || r.Key.ID != ids[i] || r.Key.Key != "" {
			t.Fatalf("renewed %d: %+v %v", i, r, r.Err())
		}
	}
	for _, i := range []int{1, 2} {
		wantRefused(t, renewed[i].Err(), http.StatusNotFound, apiwire.CodeNotFound, ids[i])
	}

	for _, n := range []int{0, apiwire.MaxBatch + 1} {
		batch := make([]apiwire.CreateTunnelKey, n)
		for i := range batch {
			batch[i] = key("http", fmt.Sprintf("many-%d", i), "cluster-1/demo")
		}
		_, err := bound.CreateTunnelKeys(ctx, batch)
		wantRefused(t, err, http.StatusBadRequest, apiwire.CodeInvalidRequest, "split a larger batch")
		_, err = bound.RenewTunnelKeys(ctx, make([]string, n))
		wantRefused(t, err, http.StatusBadRequest, apiwire.CodeInvalidRequest, "split a larger batch")
	}
}

// The list in pages: in id order, each page at most the limit, next
// leading to the rest, keys of other labels between them left out (a
// later page reads on from its place); the first page's ETag answers 304
// while the list is the same and changes with it.
func TestKeyListPagesAndETag(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	c := f.c(f.write)
	labels := map[string]string{"cluster": "a"}
	for i := range 7 {
		if _, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: fmt.Sprintf("p%d", i), Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: fmt.Sprintf("other%d", i),
			Labels: map[string]string{"cluster": "b"}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListTunnelKeys(ctx, labels)
	if err != nil || len(all) != 7 {
		t.Fatalf("list: %d %v", len(all), err)
	}
	var paged []string
	var etag string
	req := apiwire.KeyPageRequest{Labels: labels, Limit: 3}
	for page := 0; ; page++ {
		p, err := c.ListTunnelKeysPage(ctx, req)
		if err != nil || len(p.Items) > 3 || p.NotModified {
			t.Fatalf("page %d: %+v %v", page, p, err)
		}
		if page == 0 {
			etag = p.ETag
		} else if p.ETag != "" {
			t.Errorf("page %d carries an ETag; only the first does", page)
		}
		for _, k := range p.Items {
			paged = append(paged, k.ID)
		}
		if p.Next == "" {
			break
		}
		if p.Next != p.Items[len(p.Items)-1].ID {
			t.Fatalf("page %d: next %q is not its last key", page, p.Next)
		}
		req.After = p.Next
	}
	for i, k := range all {
		if i >= len(paged) || paged[i] != k.ID {
			t.Fatalf("pages give %v, the whole list %d keys in id order", paged, len(all))
		}
	}
	if len(paged) != len(all) || etag == "" {
		t.Fatalf("%d keys paged, ETag %q", len(paged), etag)
	}

	same, err := c.ListTunnelKeysPage(ctx, apiwire.KeyPageRequest{Labels: labels, Limit: 3, IfNoneMatch: etag})
	if err != nil || !same.NotModified || len(same.Items) != 0 || same.ETag != etag {
		t.Fatalf("the same list with If-None-Match: %+v %v", same, err)
	}
	if err := c.RevokeTunnelKey(ctx, all[6].ID); err != nil {
		t.Fatal(err)
	}
	changed, err := c.ListTunnelKeysPage(ctx, apiwire.KeyPageRequest{Labels: labels, Limit: 3, IfNoneMatch: etag})
	if err != nil || changed.NotModified || changed.ETag == etag || len(changed.Items) != 3 {
		t.Fatalf("after a revocation, If-None-Match of the old list: %+v %v", changed, err)
	}

	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=tk_1"} {
		status, out, _ := f.raw(t, f.write, http.MethodGet, "/v1/tunnel-keys?"+q, "")
		if status != http.StatusBadRequest || out["code"] != apiwire.CodeInvalidRequest {
			t.Errorf("GET /v1/tunnel-keys?%s: %d %v", q, status, out)
		}
	}
}
