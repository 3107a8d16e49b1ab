package cli

import (
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
)

// This suite's API server has no Gateway API CRDs: preflight says so as a
// warning (the operator runs without them), and fails when the values ask
// for the GatewayClass, which cannot be created without them.
func TestPreflightGatewayAPIMissing(t *testing.T) {
	restoreChartCRDs(t)
	const desc = "the Gateway API CRDs (gateway.networking.k8s.io/v1) are installed"
	r := tuna(t, append([]string{"preflight", "-o", "json"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitOK)
	c := check(t, decodeReport(t, r), desc)
	if c.Result != report.Warning || !strings.Contains(c.Error, "missing: GatewayClass, Gateway, HTTPRoute, ReferenceGrant") {
		t.Fatalf("Gateway API check: %+v", c)
	}
	r = tuna(t, append([]string{"preflight", "-o", "json", "--set", "gatewayClass.enabled=true"}, valuesArgs(env.Edge.OperatorKey)...)...)
	expectCode(t, r, cmd.ExitFailed)
	if c := check(t, decodeReport(t, r), desc); c.Result != report.Error || !strings.Contains(c.Hint, "gatewayClass.enabled=false") {
		t.Fatalf("Gateway API check with gatewayClass.enabled=true: %+v", c)
	}
}
