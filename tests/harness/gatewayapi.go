package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// GatewayAPIModule is the Gateway API module whose CRDs the tests install:
// the version the product's go.mod pins.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// gatewayAPIKinds are the CRDs of the standard channel the operator uses
// (TCPRoute included, which the module ships in both channels).
var gatewayAPIKinds = []string{"gatewayclasses", "gateways", "httproutes", "referencegrants", "tcproutes", "backendtlspolicies"}

// GatewayAPIStandardDir is the standard channel's folder in the module
// cache: every CRD (and the admission policy) that the release's
// standard-install.yaml holds, offline.
func GatewayAPIStandardDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", GatewayAPIModule)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the %s module (go list -m): %w", GatewayAPIModule, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard"), nil
}

// GatewayAPICRDs are the paths of those CRDs in the module cache.
func GatewayAPICRDs() ([]string, error) {
	dir, err := GatewayAPIStandardDir()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, k := range gatewayAPIKinds {
		paths = append(paths, filepath.Join(dir, "gateway.networking.k8s.io_"+k+".yaml"))
	}
	return paths, nil
}

// InstallGatewayAPI installs the Gateway API CRDs and waits until the API
// server serves them. The chart does not install them; a cluster's admin
// does, as here.
func (cp *ControlPlane) InstallGatewayAPI() error {
	paths, err := GatewayAPICRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the Gateway API CRDs: %w", err)
	}
	return nil
}
