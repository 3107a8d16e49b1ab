//go:build conformance

package conformance

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	gwtests "sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// gatewayClass is the chart's GatewayClass (gatewayClass.enabled).
const gatewayClass = "tuna"

// TUNA_CONFORMANCE_REPORT is where the suite's report is written, relative
// to the repository's root (go tool task test:conformance
// REPORT=docs/conformance/... writes the published one); by default the
// run's folder.
const reportEnv = "TUNA_CONFORMANCE_REPORT"

// TUNA_CONFORMANCE_TESTS runs only the named tests of the profile
// (comma-separated short names, go tool task test:conformance
// TESTS=GatewayInvalidTLSConfiguration,...): the others are skipped, and
// the report then says less than the whole profile. For development only.
const testsEnv = "TUNA_CONFORMANCE_TESTS"

// skipTests are the tests not to run: skipped, or with TUNA_CONFORMANCE_TESTS
// every test it does not name.
func skipTests() []string {
	only := os.Getenv(testsEnv)
	if only == "" {
		return skipped
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []string
	for _, ct := range gwtests.ConformanceTests {
		if !want[ct.ShortName] {
			out = append(out, ct.ShortName)
		}
	}
	return out
}

// skipped are the suite's tests of the claimed profile that are not run,
// each with its reason in docs/gateway-api.md (Conformance): none.
var skipped []string

func TestConformance(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		gwv1.Install, v1alpha2.Install, v1alpha3.Install, xv1alpha1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	opts := client.Options{Scheme: scheme}
	c, err := client.New(env.cluster.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	report := os.Getenv(reportEnv)
	switch {
	case report == "":
		report = filepath.Join(env.dir, "conformance-report.yaml")
	case !filepath.IsAbs(report):
		report = filepath.Join(harness.RepoRoot(), report)
	}
	timeouts := config.DefaultTimeoutConfig()
	// The features are the GatewayClass's status.supportedFeatures, which
	// the operator writes (operator/pkg/gateway.Features): the suite reads
	// what the product declares.
	gwconformance.RunConformanceWithOptions(t, suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     gatewayClass,
			CleanupBaseResources: false, // the cluster goes with the run
			CleanupTestResources: true,
			TimeoutConfig:        timeouts,
			Mode:                 "default",
			ConformanceProfiles:  []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName},
			SkipTests:            skipTests(),
			ReportOutputPath:     report,
			Implementation: confv1.Implementation{
				Organization: "tuna",
				Project:      "tuna-k8s-operator",
				URL:          "https://code.tuna.am/tuna/k8s-operator",
				Version:      tag,
				Contact:      []string{"https://code.tuna.am/tuna/k8s-operator/issues"},
			},
		},
		Client:        c,
		ClientOptions: opts,
		Clientset:     env.cluster.Client,
		RestConfig:    env.cluster.Config,
		ManifestFS:    []fs.FS{&gwconformance.Manifests},
	})
}
