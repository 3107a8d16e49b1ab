package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The field managers: the chart's objects look as an install by Helm 4
// (or tuna-operator install) leaves them, the Gateway API's as a cluster
// admin's `kubectl apply --server-side` does.
const (
	helmManager    = "helm"
	kubectlManager = "kubectl"
)

// install applies what a user of the chart has at cluster scope and in
// the release namespace: the chart's CRDs, the Gateway API's standard
// channel from the pinned module (as a cluster's admin installs it), then
// every rendered object but the Deployments, whose pods runDeployments
// runs as processes.
func (c *Cluster) install(ctx context.Context) error {
	if _, err := c.CP.Namespace(ctx, harness.OperatorNamespace); err != nil {
		return err
	}
	var crds []*unstructured.Unstructured
	for _, m := range c.Rendered.CRDs {
		crds = append(crds, m.Object.DeepCopy())
	}
	dir, err := harness.GatewayAPIStandardDir()
	if err != nil {
		return err
	}
	gatewayAPI, err := readManifests(dir)
	if err != nil {
		return err
	}
	if err := c.apply(ctx, helmManager, crds); err != nil {
		return err
	}
	if err := c.apply(ctx, kubectlManager, gatewayAPI); err != nil {
		return err
	}
	if err := c.waitEstablished(ctx, append(crds, gatewayAPI...)); err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, m := range c.Rendered.Manifests {
		if m.Kind() == "Deployment" {
			continue
		}
		objs = append(objs, m.Object.DeepCopy())
	}
	return c.apply(ctx, helmManager, objs)
}

// apply applies each object with server-side apply as manager.
func (c *Cluster) apply(ctx context.Context, manager string, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetNamespace() == "" && c.namespaced(o) {
			o.SetNamespace(harness.OperatorNamespace)
		}
		o.SetManagedFields(nil)
		if err := c.CP.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// namespaced says whether the API server stores o's kind per namespace.
func (c *Cluster) namespaced(o *unstructured.Unstructured) bool {
	m, err := c.CP.Client.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
	return err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace
}

// waitEstablished waits until every CRD among objs is Established, so
// that objects of its kind can be applied next.
func (c *Cluster) waitEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := waitFor(ctx, time.Minute, "CRD "+o.GetName()+" Established", func() (bool, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.CP.Client.Get(ctx, types.NamespacedName{Name: o.GetName()}, got); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, x := range conds {
				if cond, ok := x.(map[string]any); ok && cond["type"] == "Established" && cond["status"] == string(metav1.ConditionTrue) {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readManifests reads every object of the YAML files in dir, in file name
// order.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(f), 4096)
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// secretOrConfigMap reads a Secret's or ConfigMap's data, as the kubelet
// does for a volume or an environment variable.
func (c *Cluster) secretOrConfigMap(ctx context.Context, kind, namespace, name string) (map[string][]byte, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	switch kind {
	case "Secret":
		var s corev1.Secret
		if err := c.CP.Client.Get(ctx, key, &s); err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		return s.Data, nil
	default:
		var cm corev1.ConfigMap
		if err := c.CP.Client.Get(ctx, key, &cm); err != nil {
			return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
		}
		data := map[string][]byte{}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			data[k] = v
		}
		return data, nil
	}
}
