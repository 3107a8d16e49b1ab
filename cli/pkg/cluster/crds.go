package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"code.tuna.am/tuna/k8s-operator/chart"
)

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ChartCRDs returns the CRDs of the embedded chart's crds/, sorted by name.
func ChartCRDs() ([]*unstructured.Unstructured, error) {
	fsys := chart.Files()
	entries, err := fs.ReadDir(fsys, "crds")
	if err != nil {
		return nil, fmt.Errorf("reading the chart's crds/: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") && !strings.HasSuffix(e.Name(), ".yml") {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join("crds", e.Name()))
		if err != nil {
			return nil, err
		}
		objs, err := DecodeYAML(data)
		if err != nil {
			return nil, fmt.Errorf("crds/%s: %w", e.Name(), err)
		}
		out = append(out, objs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// DecodeYAML decodes a multi-document YAML stream into objects, skipping
// empty documents.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := map[string]any{}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// CRDResult is what applying one CRD did: "created", "configured" or
// "unchanged".
type CRDResult struct {
	Name   string `json:"name"`
	Result string `json:"result"`
}

// ApplyCRDs applies the CRDs with server-side apply as field manager
// "helm", taking over fields other managers own (as `kubectl apply
// --server-side --force-conflicts --field-manager=helm` would), then waits
// until every CRD is Established. Progress goes to progress.
func (c *Cluster) ApplyCRDs(ctx context.Context, crds []*unstructured.Unstructured, progress io.Writer) ([]CRDResult, error) {
	var out []CRDResult
	for _, crd := range crds {
		name := crd.GetName()
		before, err := c.Dynamic.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return out, fmt.Errorf("reading CRD %s: %w", name, err)
		}
		after, err := c.Dynamic.Resource(CRDResource).Apply(ctx, name, applyCopy(crd), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return out, fmt.Errorf("applying CRD %s (server-side apply, field manager %s): %w", name, FieldManager, err)
		}
		res := "created"
		if before != nil && err == nil {
			res = "configured"
			if before.GetResourceVersion() == after.GetResourceVersion() {
				res = "unchanged"
			}
		}
		fmt.Fprintf(progress, "CRD %s %s\n", name, res)
		out = append(out, CRDResult{Name: name, Result: res})
	}
	for _, crd := range crds {
		if err := c.waitEstablished(ctx, crd.GetName(), progress); err != nil {
			return out, err
		}
	}
	c.Invalidate()
	return out, nil
}

func applyCopy(u *unstructured.Unstructured) *unstructured.Unstructured {
	cp := u.DeepCopy()
	unstructured.RemoveNestedField(cp.Object, "status")
	unstructured.RemoveNestedField(cp.Object, "metadata", "creationTimestamp")
	return cp
}

func (c *Cluster) waitEstablished(ctx context.Context, name string, progress io.Writer) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd, err := c.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true, nil
			}
			if cond.Type == apiextv1.NamesAccepted && cond.Status == apiextv1.ConditionFalse {
				last = cond.Message
			}
		}
		return false, nil
	})
	if err != nil {
		msg := fmt.Sprintf("CRD %s is not Established after 1m", name)
		if last != "" {
			msg += ": " + last
		}
		return fmt.Errorf("%s (kubectl describe crd %s shows why)", msg, name)
	}
	return nil
}

// DeleteCRDs deletes the CRDs by name and waits until they are gone.
func (c *Cluster) DeleteCRDs(ctx context.Context, names []string, progress io.Writer) error {
	for _, n := range names {
		err := c.Dynamic.Resource(CRDResource).Delete(ctx, n, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(progress, "CRD %s already gone\n", n)
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting CRD %s: %w", n, err)
		}
		fmt.Fprintf(progress, "CRD %s deleted\n", n)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			if _, err := c.Dynamic.Resource(CRDResource).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the CRDs to be deleted: %w", err)
	}
	c.Invalidate()
	return nil
}

// CRDState is how a live CRD compares with the chart's.
type CRDState struct {
	Name string `json:"name"`
	// State is "missing", "current" or "stale".
	State string `json:"state"`
	// Changes summarise what an apply would change, e.g. "schema of
	// version v1alpha1 changed".
	Changes []string `json:"changes,omitempty"`
}

// CompareCRDs compares the live CRDs with the wanted ones by a server-side
// dry-run apply (what `install`/`upgrade` would do). When the caller may
// not patch CRDs, it compares the specs directly.
func (c *Cluster) CompareCRDs(ctx context.Context, crds []*unstructured.Unstructured) ([]CRDState, error) {
	var out []CRDState
	for _, crd := range crds {
		name := crd.GetName()
		live, err := c.Dynamic.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out = append(out, CRDState{Name: name, State: "missing"})
			continue
		}
		if err != nil {
			return out, fmt.Errorf("reading CRD %s: %w", name, err)
		}
		want, err := c.Dynamic.Resource(CRDResource).Apply(ctx, name, applyCopy(crd), metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) {
			want = mergeForCompare(live, crd)
		} else if err != nil {
			return out, fmt.Errorf("dry-run apply of CRD %s: %w", name, err)
		}
		changes := SummarizeCRD(live, want)
		st := CRDState{Name: name, State: "current"}
		if len(changes) > 0 {
			st.State, st.Changes = "stale", changes
		}
		out = append(out, st)
	}
	return out, nil
}

// mergeForCompare is the live CRD with the wanted spec: the fallback of a
// comparison without the right to dry-run.
func mergeForCompare(live, want *unstructured.Unstructured) *unstructured.Unstructured {
	m := live.DeepCopy()
	spec, _, _ := unstructured.NestedMap(want.Object, "spec")
	_ = unstructured.SetNestedMap(m.Object, spec, "spec")
	return m
}

// SummarizeCRD says how CRD b differs from a, one line per change:
// versions added or removed, a version's schema, served/storage flags,
// printer columns and subresources, and names, scope and conversion.
func SummarizeCRD(a, b *unstructured.Unstructured) []string {
	var ca, cb apiextv1.CustomResourceDefinition
	if runtime.DefaultUnstructuredConverter.FromUnstructured(a.Object, &ca) != nil ||
		runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &cb) != nil {
		if !reflect.DeepEqual(a.Object["spec"], b.Object["spec"]) {
			return []string{"spec changed"}
		}
		return nil
	}
	var out []string
	av := map[string]apiextv1.CustomResourceDefinitionVersion{}
	for _, v := range ca.Spec.Versions {
		av[v.Name] = v
	}
	bv := map[string]bool{}
	for _, v := range cb.Spec.Versions {
		bv[v.Name] = true
		old, ok := av[v.Name]
		if !ok {
			out = append(out, fmt.Sprintf("new version %s", v.Name))
			continue
		}
		if !reflect.DeepEqual(old.Schema, v.Schema) {
			out = append(out, fmt.Sprintf("schema of version %s changed", v.Name))
		}
		var flags []string
		if old.Served != v.Served {
			flags = append(flags, fmt.Sprintf("served %t→%t", old.Served, v.Served))
		}
		if old.Storage != v.Storage {
			flags = append(flags, fmt.Sprintf("storage %t→%t", old.Storage, v.Storage))
		}
		if old.Deprecated != v.Deprecated || !reflect.DeepEqual(old.DeprecationWarning, v.DeprecationWarning) {
			flags = append(flags, "deprecation changed")
		}
		if !reflect.DeepEqual(old.AdditionalPrinterColumns, v.AdditionalPrinterColumns) {
			flags = append(flags, "printer columns changed")
		}
		if !reflect.DeepEqual(old.Subresources, v.Subresources) {
			flags = append(flags, "subresources changed")
		}
		if !reflect.DeepEqual(old.SelectableFields, v.SelectableFields) {
			flags = append(flags, "selectable fields changed")
		}
		if len(flags) > 0 {
			out = append(out, fmt.Sprintf("version %s: %s", v.Name, strings.Join(flags, ", ")))
		}
	}
	for _, v := range ca.Spec.Versions {
		if !bv[v.Name] {
			out = append(out, fmt.Sprintf("version %s removed", v.Name))
		}
	}
	if !reflect.DeepEqual(ca.Spec.Names, cb.Spec.Names) {
		out = append(out, "names changed")
	}
	if ca.Spec.Scope != cb.Spec.Scope {
		out = append(out, fmt.Sprintf("scope %s→%s", ca.Spec.Scope, cb.Spec.Scope))
	}
	if !reflect.DeepEqual(ca.Spec.Conversion, cb.Spec.Conversion) {
		out = append(out, "conversion changed")
	}
	if ca.Spec.PreserveUnknownFields != cb.Spec.PreserveUnknownFields {
		out = append(out, "preserveUnknownFields changed")
	}
	if len(out) == 0 && !reflect.DeepEqual(normalize(a), normalize(b)) {
		out = append(out, "metadata changed")
	}
	return out
}
