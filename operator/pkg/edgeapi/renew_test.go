package edgeapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
)

func TestKeepKey(t *testing.T) {
	const ttl = time.Hour
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		ttl         time.Duration
		at          time.Duration // after issue
		fail        error
		wantNext    time.Duration
		wantExpired bool
		wantErr     bool
		wantRenewed bool
	}{
		{name: "fresh key waits for half its TTL", ttl: ttl, at: time.Minute, wantNext: 29 * time.Minute},
		{name: "past half its TTL it is renewed", ttl: ttl, at: 31 * time.Minute, wantNext: 30 * time.Minute, wantRenewed: true},
		{name: "exactly at half it is renewed", ttl: ttl, at: 30 * time.Minute, wantNext: 30 * time.Minute, wantRenewed: true},
		{name: "past its expiry it is lost", ttl: ttl, at: 2 * time.Hour, wantExpired: true},
		{name: "expired while renewing", ttl: ttl, at: 40 * time.Minute, fail: fake.APIError(http.StatusConflict, apiwire.CodeKeyExpired), wantExpired: true},
		{name: "edge down while renewing", ttl: ttl, at: 40 * time.Minute, fail: fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal), wantErr: true},
		{name: "a key that never expires", at: 100 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fake.New()
			e.TTL = c.ttl
			e.SetNow(t0)
			k, err := e.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http"})
			if err != nil {
				t.Fatal(err)
			}
			if c.fail != nil {
				e.FailNext("RenewTunnelKey", c.fail)
			}
			now := t0.Add(c.at)
			e.SetNow(now)
			next, expired, err := edgeapi.KeepKey(context.Background(), e, k, now)
			if (err != nil) != c.wantErr || expired != c.wantExpired || next != c.wantNext {
				t.Fatalf("KeepKey = %v, %v, %v; want next %v, expired %v, error %v", next, expired, err, c.wantNext, c.wantExpired, c.wantErr)
			}
			stored, _ := e.Key(k.ID)
			renewed := stored.ExpiresAt != nil && stored.ExpiresAt.Equal(now.Add(c.ttl))
			if renewed != c.wantRenewed {
				t.Fatalf("stored expiry %v: renewed = %v, want %v", stored.ExpiresAt, renewed, c.wantRenewed)
			}
		})
	}
}

func TestSooner(t *testing.T) {
	for _, c := range []struct{ after, d, want time.Duration }{
		{time.Minute, 0, time.Minute},
		{time.Minute, time.Second, time.Second},
		{time.Minute, time.Hour, time.Minute},
		{0, time.Hour, time.Hour},
	} {
		if got := edgeapi.Sooner(c.after, c.d); got != c.want {
			t.Errorf("Sooner(%v, %v) = %v, want %v", c.after, c.d, got, c.want)
		}
	}
}
