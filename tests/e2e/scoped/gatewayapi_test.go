package scoped

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// This suite's API server has no Gateway API CRDs, as a cluster where
// nobody installed them. The operator sees that from discovery and leaves
// its Gateway controllers off instead of failing to start watches of
// unknown kinds: the controller and agent of this suite serve every other
// test here, and TestMain fails if either of them stopped with an error.
// (tests/e2e installs the CRDs and tests the Gateways themselves; the CRDs
// are not installed here, so the test repeats under -count.)
func TestGatewayAPIMissing(t *testing.T) {
	httpClient, err := rest.HTTPClientFor(cp.Config)
	require.NoError(t, err)
	mapper, err := apiutil.NewDynamicRESTMapper(cp.Config, httpClient)
	require.NoError(t, err)
	require.False(t, gateway.Installed(mapper), "the Gateway API must look absent on an API server without its CRDs")

}
