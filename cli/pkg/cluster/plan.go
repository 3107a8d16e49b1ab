package cluster

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Actions of a plan.
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionDelete    = "delete"
	ActionUnchanged = "unchanged"
)

// Helm's ownership metadata on every object of a release.
const (
	HelmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	HelmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
	ManagedByLabel                 = "app.kubernetes.io/managed-by"
)

// Change is what an install or upgrade would do to one object.
type Change struct {
	Action     string `json:"action"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Fields are the changed field paths of an update, e.g.
	// "spec.template.spec.containers[0].args" (values are not shown: they
	// may be secret).
	Fields []string `json:"fields,omitempty"`
	// Summary is a CRD change in words, e.g. "schema of version v1alpha1 changed".
	Summary []string `json:"summary,omitempty"`
	// Note is context, e.g. that the namespace does not exist yet.
	Note string `json:"note,omitempty"`
	// Error says why the operation would fail for this object.
	Error string `json:"error,omitempty"`
}

// Ref is "Kind namespace/name" or "Kind name".
func (c Change) Ref() string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %s", c.Kind, c.Name)
}

// SetHelmMetadata adds the label and annotations Helm puts on every object
// of a release, so that a dry-run applies exactly what Helm will.
func SetHelmMetadata(obj *unstructured.Unstructured, release, namespace string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = "Helm"
	obj.SetLabels(labels)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[HelmReleaseNameAnnotation] = release
	ann[HelmReleaseNamespaceAnnotation] = namespace
	obj.SetAnnotations(ann)
}

// PlanObjects compares the wanted objects with the cluster by applying each
// with server-side apply in dry-run mode (field manager "helm", as Helm
// applies them) and comparing the result with the live object. Objects of
// previous (the last release) that are not wanted any more are deletions.
// Objects without a namespace get defaultNamespace when namespaced. owner
// is the release (name, namespace) the live objects must belong to.
func (c *Cluster) PlanObjects(ctx context.Context, wanted, previous []*unstructured.Unstructured, defaultNamespace, release string) ([]Change, error) {
	var out []Change
	seen := map[string]bool{}
	nsExists := map[string]bool{}
	for _, obj := range wanted {
		obj = obj.DeepCopy()
		ch := Change{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName()}
		ri, err := c.resourceFor(obj, defaultNamespace)
		if err != nil {
			ch.Action, ch.Namespace = ActionCreate, obj.GetNamespace()
			ch.Error = fmt.Sprintf("the cluster does not serve %s %s: %v", obj.GetAPIVersion(), obj.GetKind(), err)
			out = append(out, ch)
			continue
		}
		ch.Namespace = obj.GetNamespace()
		seen[key(obj)] = true
		live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return out, fmt.Errorf("reading %s: %w", ch.Ref(), err)
		}
		if apierrors.IsNotFound(err) {
			live = nil
		}
		if live == nil && ch.Namespace != "" {
			exists, ok := nsExists[ch.Namespace]
			if !ok {
				_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ch.Namespace, metav1.GetOptions{})
				exists = err == nil
				nsExists[ch.Namespace] = exists
			}
			if !exists {
				ch.Action, ch.Note = ActionCreate, fmt.Sprintf("namespace %s does not exist yet (install creates it); not validated by the server", ch.Namespace)
				out = append(out, ch)
				continue
			}
		}
		if live != nil {
			if owner := ownerOf(live); owner != release+"/"+defaultNamespace {
				ch.Action = ActionUpdate
				if owner == "/" {
					ch.Error = "exists and is not managed by Helm: Helm refuses to take it over (delete it, or stop rendering it)"
				} else {
					ch.Error = fmt.Sprintf("exists and belongs to release %s: Helm refuses to take it over", owner)
				}
				out = append(out, ch)
				continue
			}
		}
		opts := metav1.ApplyOptions{FieldManager: FieldManager, DryRun: []string{metav1.DryRunAll}}
		result, err := ri.Apply(ctx, obj.GetName(), applyCopy(obj), opts)
		if apierrors.IsConflict(err) {
			ch.Note = "conflicts with other field managers; install/upgrade take the fields over only with --force-conflicts: " + conflictText(err)
			opts.Force = true
			result, err = ri.Apply(ctx, obj.GetName(), applyCopy(obj), opts)
		}
		if err != nil {
			ch.Action = ActionUpdate
			if live == nil {
				ch.Action = ActionCreate
			}
			ch.Error = fmt.Sprintf("the server refuses it: %v", err)
			out = append(out, ch)
			continue
		}
		if live == nil {
			ch.Action = ActionCreate
		} else {
			ch.Fields = DiffFields(normalize(live), normalize(result))
			ch.Action = ActionUpdate
			if len(ch.Fields) == 0 {
				ch.Action = ActionUnchanged
			}
		}
		if obj.GetKind() == "CustomResourceDefinition" && ch.Action == ActionUpdate {
			ch.Summary = SummarizeCRD(live, result)
		}
		out = append(out, ch)
	}
	for _, obj := range previous {
		obj = obj.DeepCopy()
		ri, err := c.resourceFor(obj, defaultNamespace)
		if err != nil || seen[key(obj)] {
			continue
		}
		live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("reading %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		ch := Change{Action: ActionDelete, APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if live.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
			ch.Action, ch.Note = ActionUnchanged, "kept: helm.sh/resource-policy=keep"
		}
		out = append(out, ch)
	}
	return out, nil
}

func conflictText(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "conflict"); i >= 0 {
		return msg[i:]
	}
	return msg
}

func ownerOf(obj *unstructured.Unstructured) string {
	a := obj.GetAnnotations()
	return a[HelmReleaseNameAnnotation] + "/" + a[HelmReleaseNamespaceAnnotation]
}

// key identifies an object across API versions.
func key(obj *unstructured.Unstructured) string {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	return strings.Join([]string{gv.Group, obj.GetKind(), obj.GetNamespace(), obj.GetName()}, "/")
}

// resourceFor maps an object to its resource client and sets its namespace
// (defaultNamespace when namespaced and unset, "" when cluster-scoped).
func (c *Cluster) resourceFor(obj *unstructured.Unstructured, defaultNamespace string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(defaultNamespace)
		}
		return c.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	obj.SetNamespace("")
	return c.Dynamic.Resource(m.Resource), nil
}

// normalize drops what the server sets and no apply changes: managed
// fields, resource version, generation, uid, timestamps and status.
func normalize(u *unstructured.Unstructured) map[string]any {
	cp := u.DeepCopy().Object
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(cp, "metadata", f)
	}
	delete(cp, "status")
	return cp
}

// DiffFields lists the paths where a and b differ, sorted, at most 20.
func DiffFields(a, b map[string]any) []string {
	var out []string
	diffValue("", a, b, &out)
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("… and %d more", len(out)-20))
	}
	return out
}

func diffValue(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, orRoot(path))
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diffValue(p, av[k], bv[k], out)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, orRoot(path))
			return
		}
		for i := range av {
			diffValue(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
	default:
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, orRoot(path))
		}
	}
}

func orRoot(p string) string {
	if p == "" {
		return "(object)"
	}
	return p
}

// HasChanges reports whether any change is not "unchanged".
func HasChanges(cs []Change) bool {
	for _, c := range cs {
		if c.Action != ActionUnchanged {
			return true
		}
	}
	return false
}

// HasErrors reports whether any change would fail.
func HasErrors(cs []Change) bool {
	for _, c := range cs {
		if c.Error != "" {
			return true
		}
	}
	return false
}
