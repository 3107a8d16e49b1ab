package api_test

import (
	"context"
	"net/netip"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/api"
)

// By default a tunnel key names a subdomain or a reserved custom domain,
// never an address of the edge.
func TestKeysOutsideBaseDomainRefusedByDefault(t *testing.T) {
	f := newFixture(t, "")
	c := f.c(f.write)
	for _, addr := range []string{"192.0.2.7", "shop.example.net"} {
		_, err := c.CreateTunnelKey(context.Background(), apiwire.CreateTunnelKey{Protocol: "http", Address: addr, Owner: "c/a"})
		if code := apiwire.CodeOf(err); code != apiwire.CodeInvalidRequest && code != apiwire.CodeInvalidDomain {
			t.Fatalf("%s: %v", addr, err)
		}
	}
}

// An --any-host edge with Gateway addresses takes keys for any host and
// for its own addresses, each claimed by the first owner: another owner
// is refused with address_owned, the holder gets more keys, and an
// address outside the pool is refused.
func TestAnyHostAndGatewayAddressesAreFirstClaimed(t *testing.T) {
	f := newFixtureWith(t, "", func(c *api.Config) {
		c.AnyHost = true
		c.GatewayAddresses = []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	})
	ctx := context.Background()
	c := f.c(f.full)
	for _, addr := range []string{"192.0.2.7", "Shop.Example.net"} {
		k, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: addr, Owner: "c/a"})
		if err != nil {
			t.Fatalf("%s, first owner: %v", addr, err)
		}
		if _, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: k.Address, Owner: "c/a"}); err != nil {
			t.Fatalf("%s, the holder again: %v", addr, err)
		}
		_, err = c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: addr, Owner: "c/b"})
		wantCode(t, err, apiwire.CodeAddressOwned)
	}
	_, err := c.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: "192.0.2.8", Owner: "c/a"})
	wantCode(t, err, apiwire.CodeInvalidRequest)
}
