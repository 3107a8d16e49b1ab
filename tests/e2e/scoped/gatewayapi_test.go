package scoped

import (
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This suite's API server has no Gateway API CRDs, as a cluster where
// nobody installed them. The operator sees that from discovery and leaves
// its Gateway controllers off instead of failing to start watches of
// unknown kinds: the controller and agent of this suite serve every other
// test here, and TestMain fails if either of them stopped with an error.
// (tests/e2e installs the CRDs before the operator starts and tests the
// Gateways themselves, tests/e2e/lateapi installs them after; the CRDs are
// not installed here, so the test repeats under -count.)
func TestGatewayAPIMissing(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	require.NoError(t, err)
	_, err = dc.ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	require.True(t, apierrors.IsNotFound(err), "the Gateway API must be absent from an API server without its CRDs: %v", err)
}
