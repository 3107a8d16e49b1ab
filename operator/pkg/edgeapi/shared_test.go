package edgeapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// These tests run the shared keys against the real edge, in this process
// on loopback, with the operator's key bound to the test cluster.

func startEdge(t *testing.T, limit float64, burst int) *harness.Edge {
	t.Helper()
	e, err := harness.StartEdge(context.Background(), t.TempDir(), harness.EdgeOptions{APIRateLimit: limit, APIRateBurst: burst})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// operatorAPI is the client as the controller builds it: every call
// through one pacer.
func operatorAPI(t *testing.T, e *harness.Edge) *client.Client {
	t.Helper()
	tr, err := e.Trust().Transport()
	if err != nil {
		t.Fatal(err)
	}
	return client.New(e.APIURL(), e.OperatorKey, client.WithHTTPClient(&http.Client{
		Timeout: 30 * time.Second, Transport: edgeapi.NewPacer().Transport(tr)}))
}

var cluster = map[string]string{edgeapi.LabelCluster: harness.TestClusterID}

func shared(api *client.Client, pageSize int) *edgeapi.SharedKeys {
	v := edgeapi.NewKeyView(api, cluster)
	v.PageSize = pageSize
	return &edgeapi.SharedKeys{API: api, View: v, Batch: edgeapi.NewBatcher(api)}
}

func keyFor(i int) apiwire.CreateTunnelKey {
	return apiwire.CreateTunnelKey{Protocol: "http", Address: fmt.Sprintf("t%d", i), Owner: harness.TestClusterID + "/ns",
		Labels: map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelUID: fmt.Sprint(i)}}
}

func calls(t *testing.T, e *harness.Edge, route string, code int) int {
	t.Helper()
	counts, err := e.APIRequests()
	if err != nil {
		t.Fatal(err)
	}
	return counts[route][code]
}

// Forty reconcilers issue a key each at once, against an edge that allows
// two calls a second: the keys go in a few batch calls, none refused, and
// the view lists them all from the operator's own writes and one read.
func TestKeysIssuedInBatchesWithinTheBudget(t *testing.T) {
	e := startEdge(t, 2, 2)
	s := shared(operatorAPI(t, e), 7)
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			k, err := s.CreateTunnelKey(context.Background(), keyFor(i))
			if err != nil {
				errs <- err
				return
			}
			if k.Key == "" || k.Address != fmt.Sprintf("t%d.%s", i, harness.BaseDomain) {
				errs <- fmt.Errorf("key %d: %+v", i, k)
			}
			ids[i] = k.ID
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	batches := calls(t, e, "POST /v1/tunnel-keys/batch", http.StatusOK)
	if batches > 4 || calls(t, e, "POST /v1/tunnel-keys/batch", http.StatusTooManyRequests) != 0 {
		t.Fatalf("%d keys took %d batch calls (want at most 4) and %d refusals", n, batches,
			calls(t, e, "POST /v1/tunnel-keys/batch", http.StatusTooManyRequests))
	}
	keys, err := s.ListTunnelKeys(context.Background(), cluster)
	if err != nil || len(keys) != n {
		t.Fatalf("the view lists %d keys (%v), want %d", len(keys), err, n)
	}
	for _, k := range keys {
		if k.Key != "" {
			t.Fatalf("the view keeps key %s's secret", k.ID)
		}
	}
	one, err := s.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelUID: "7"})
	if err != nil || len(one) != 1 || one[0].ID != ids[7] {
		t.Fatalf("by uid: %+v %v", one, err)
	}
	// One read of the edge, in pages of 7.
	if reads := calls(t, e, "GET /v1/tunnel-keys", http.StatusOK); reads != (n+6)/7 {
		t.Fatalf("%d list calls for %d keys in pages of 7", reads, n)
	}
	if _, err := s.ListTunnelKeys(context.Background(), map[string]string{edgeapi.LabelCluster: "another"}); err == nil {
		t.Fatal("a list outside the view's cluster was answered")
	}
}

// What others do on the edge shows at the next read; a read of an
// unchanged list costs one call answered 304.
func TestKeyViewFollowsTheEdge(t *testing.T) {
	e := startEdge(t, 0, 0)
	api := operatorAPI(t, e)
	s := shared(api, 0)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		k, err := s.CreateTunnelKey(ctx, keyFor(i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.ID)
	}
	freshCount(t, s, 3)
	before := calls(t, e, "GET /v1/tunnel-keys", http.StatusNotModified)
	freshCount(t, s, 3)
	if got := calls(t, e, "GET /v1/tunnel-keys", http.StatusNotModified); got != before+1 {
		t.Fatalf("a read of an unchanged list: %d answers 304, want %d", got, before+1)
	}
	// Revoked by hand, with the administrator's key: the view keeps it
	// until its next read.
	if err := e.Client(e.AdminKey).RevokeTunnelKey(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if keys, _ := s.ListTunnelKeys(ctx, cluster); len(keys) != 3 {
		t.Fatalf("the view changed without a read: %d keys", len(keys))
	}
	freshCount(t, s, 2)
	// Renewed through the batcher: the view has the new expiry at once.
	old, _ := s.ListTunnelKeys(ctx, map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelUID: "0"})
	renewed, err := s.RenewTunnelKey(ctx, ids[0])
	if err != nil || !renewed.ExpiresAt.After(*old[0].ExpiresAt) {
		t.Fatalf("renew: %+v %v (was %v)", renewed, err, old[0].ExpiresAt)
	}
	now, _ := s.ListTunnelKeys(ctx, map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelUID: "0"})
	if !now[0].ExpiresAt.Equal(*renewed.ExpiresAt) {
		t.Fatalf("the view has expiry %v after the renewal to %v", now[0].ExpiresAt, renewed.ExpiresAt)
	}
	_, err = s.RenewTunnelKey(ctx, ids[1])
	if !apiwire.IsNotFound(err) {
		t.Fatalf("renewing the revoked key: %v", err)
	}
}

// freshList reads the view again from the edge and lists the cluster's
// keys from it.
func freshList(ctx context.Context, s *edgeapi.SharedKeys) ([]apiwire.TunnelKey, error) {
	if err := s.View.Fresh(ctx, time.Now()); err != nil {
		return nil, err
	}
	return s.View.List(ctx, cluster)
}

// freshCount reads the view afresh and checks how many keys it lists.
func freshCount(t *testing.T, s *edgeapi.SharedKeys, want int) {
	t.Helper()
	keys, err := freshList(context.Background(), s)
	if err != nil || len(keys) != want {
		t.Fatalf("a fresh read lists %d keys (%v), want %d", len(keys), err, want)
	}
}

// pauseAfterPage runs hook after the edge answered the first page of a
// read and before the view takes it: a write the operator makes then is
// newer than the read.
type pauseAfterPage struct {
	*client.Client
	hook func()
}

func (p *pauseAfterPage) ListTunnelKeysPage(ctx context.Context, in apiwire.KeyPageRequest) (*apiwire.KeyPage, error) {
	page, err := p.Client.ListTunnelKeysPage(ctx, in)
	if h := p.hook; h != nil {
		p.hook = nil
		h()
	}
	return page, err
}

// A key issued, and one revoked, while a read is on its way are as the
// operator left them once the read lands: the read cannot undo them.
func TestKeyViewKeepsWritesMadeDuringARead(t *testing.T) {
	e := startEdge(t, 0, 0)
	api := operatorAPI(t, e)
	pager := &pauseAfterPage{Client: api}
	v := edgeapi.NewKeyView(pager, cluster)
	s := &edgeapi.SharedKeys{API: api, View: v, Batch: edgeapi.NewBatcher(api)}
	ctx := context.Background()
	gone, err := s.CreateTunnelKey(ctx, keyFor(0))
	if err != nil {
		t.Fatal(err)
	}
	var issued *apiwire.TunnelKey
	pager.hook = func() {
		if err := s.RevokeTunnelKey(ctx, gone.ID); err != nil {
			t.Error(err)
		}
		if issued, err = s.CreateTunnelKey(ctx, keyFor(1)); err != nil {
			t.Error(err)
		}
	}
	keys, err := freshList(ctx, s)
	if err != nil || len(keys) != 1 || issued == nil || keys[0].ID != issued.ID {
		t.Fatalf("after a read that raced a revocation and an issue: %+v %v", keys, err)
	}
	// The next read sees the edge as it is: the same.
	keys, err = freshList(ctx, s)
	if err != nil || len(keys) != 1 || keys[0].ID != issued.ID {
		t.Fatalf("the next read: %+v %v", keys, err)
	}
}

// A key the operator issued after a read and that was revoked by hand
// before the next one leaves the edge's list as that read saw it: the
// next read is answered 304, and the view must still drop the key, since
// the list the 304 confirms never had it.
func TestKeyViewDropsAKeyIssuedAndRevokedBetweenReads(t *testing.T) {
	e := startEdge(t, 0, 0)
	s := shared(operatorAPI(t, e), 0)
	ctx := context.Background()
	freshCount(t, s, 0)
	k, err := s.CreateTunnelKey(ctx, keyFor(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client(e.AdminKey).RevokeTunnelKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	before := calls(t, e, "GET /v1/tunnel-keys", http.StatusNotModified)
	freshCount(t, s, 0)
	if got := calls(t, e, "GET /v1/tunnel-keys", http.StatusNotModified); got != before+1 {
		t.Fatalf("the read after: %d answers 304, want %d (the list is as the first read saw it)", got, before+1)
	}
}
