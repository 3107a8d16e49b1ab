// Package cli tests the tuna-operator CLI against real parts: etcd and
// kube-apiserver built from pinned modules (tests/harness), the tuna edge
// on loopback, and the operator's controller running the finalizers. The
// commands run in-process through cmd.Run with the same arguments a user
// types; image_test.go runs the built binaries.
//
// The tests share one control plane and run one after another: install and
// uninstall touch cluster-wide objects (CRDs, the IngressClass).
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
)

var env struct {
	suite.Env
	kubeconfig string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
}

func TestMain(m *testing.M) {
	suite.Main(m, &env.Env, suite.Options{
		Name: "tests/cli",
		// The CLI installs the operator, into a namespace of its own making.
		NoOperatorNamespace: true,
		NoComponents:        true,
		EdgeSubdir:          "edge",
		Start: func(e *suite.Env) (func(), error) {
			env.kubeconfig = filepath.Join(e.Dir, "kubeconfig")
			if err := e.CP.WriteKubeconfig(env.kubeconfig); err != nil {
				return nil, err
			}
			var err error
			if env.kube, err = kubernetes.NewForConfig(e.CP.Config); err != nil {
				return nil, err
			}
			env.dyn, err = dynamic.NewForConfig(e.CP.Config)
			return nil, err
		},
	})
}

// result of one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s\n--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// tuna runs tuna-operator with args (and --kubeconfig) in-process.
func tuna(t *testing.T, args ...string) result {
	t.Helper()
	return tunaEnv(t, cmd.Env{}, args...)
}

func tunaEnv(t *testing.T, e cmd.Env, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e.Stdout, e.Stderr = &out, &errb
	if e.Getenv == nil {
		e.Getenv = func(string) string { return "" }
	}
	args = append([]string{}, args...)
	if len(args) > 0 && args[0] != "render" && args[0] != "version" && !contains(args, "--kubeconfig") {
		args = append(args, "--kubeconfig", env.kubeconfig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := cmd.Run(ctx, args, e)
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	t.Logf("tuna-operator %s → %d", strings.Join(args, " "), code)
	return r
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func expectCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
	return v
}

// valuesArgs are the values of a working install against the test edge.
// The operator's key of the test edge is bound to harness.TestClusterID,
// so the values name that cluster id.
func valuesArgs(key string) []string {
	return append(edgeArgs(), "--set", "credentials.apiKey="+key, "--set", "clusterID="+harness.TestClusterID)
}

// edgeArgs point at the test edge and pin its API certificate.
func edgeArgs() []string {
	return []string{"--set", "edge.apiURL=" + env.Edge.APIURL(), "--set", "edge.apiFingerprint=" + env.Edge.APIFingerprint()}
}

// chartCRDs returns a fresh copy of the chart's CRDs.
func chartCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	crds, err := cluster.ChartCRDs()
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// modifiedCRDs returns the chart's CRDs with an extra field in the
// Tunnel's spec: a test-only "newer chart".
func modifiedCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	crds := chartCRDs(t)
	for _, crd := range crds {
		if crd.GetName() != cluster.Tunnels.CRDName() {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		v := versions[0].(map[string]any)
		props, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		props["testOnlyField"] = map[string]any{"type": "string", "description": "Added by tests/cli: a newer chart's field."}
		if err := unstructured.SetNestedMap(v, props, "schema", "openAPIV3Schema", "properties", "spec", "properties"); err != nil {
			t.Fatal(err)
		}
		versions[0] = v
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
	}
	return crds
}

// restoreChartCRDs applies the chart's CRDs, as a fresh cluster has them.
func restoreChartCRDs(t *testing.T) {
	t.Helper()
	c, err := cluster.Flags{Kubeconfig: env.kubeconfig}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyCRDs(context.Background(), chartCRDs(t), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}

// tunnelSpecHasTestField reports whether the live Tunnel CRD has the
// field modifiedCRDs adds.
func tunnelSpecHasTestField(t *testing.T) bool {
	t.Helper()
	crd, err := env.dyn.Resource(cluster.CRDResource).Get(context.Background(), cluster.Tunnels.CRDName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	_, found, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "testOnlyField")
	return found
}

// eventually waits for cond, failing after a minute.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func gone(err error) bool { return apierrors.IsNotFound(err) }
