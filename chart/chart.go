// Package chart embeds the Helm chart tuna-k8s-operator and renders it with
// the Helm 4 SDK, exactly as `helm template` does (action.Install in
// client-only dry-run mode: kubeVersion check, values.schema.json
// validation, template rendering, Helm's install order).
//
// The CLI renders, plans and installs the release through it; the tests
// use it to check the chart and to take each component's RBAC from the
// rendered chart and apply it to a real apiserver (see RBAC).
package chart

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/ignore"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

//go:embed all:tuna-k8s-operator
var embedded embed.FS

const (
	// Name is the chart's name and the folder it lives in.
	Name = "tuna-k8s-operator"
	// DefaultReleaseName and DefaultNamespace are the names the
	// documentation installs with.
	DefaultReleaseName = "tuna-operator"
	DefaultNamespace   = "tuna-system"
	// DefaultKubeVersion is the Kubernetes version a client-only render
	// assumes (.Capabilities.KubeVersion) when Options.KubeVersion is empty:
	// the version the project is tested against.
	DefaultKubeVersion = "v1.37.2"

	// ComponentLabel is on every object that belongs to one component.
	ComponentLabel = "app.kubernetes.io/component"
	// The two components, values of ComponentLabel.
	ComponentController = "controller"
	ComponentAgent      = "agent"
)

// Files returns the chart's files (Chart.yaml, values.yaml, templates/,
// crds/, ...), rooted at the chart folder.
func Files() fs.FS {
	sub, err := fs.Sub(embedded, Name)
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// Load returns a fresh copy of the embedded chart, loaded as Helm loads a
// chart folder (honouring .helmignore). Helm's actions may change a chart
// they are given, so every call loads anew.
func Load() (*chartv2.Chart, error) {
	fsys := Files()
	rules := ignore.Empty()
	if data, err := fs.ReadFile(fsys, ignore.HelmIgnore); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", ignore.HelmIgnore, err)
		}
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(name, fi) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: name, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart: %w", err)
	}
	return ch, nil
}

// Options of a render. The zero value renders release DefaultReleaseName in
// DefaultNamespace for DefaultKubeVersion.
type Options struct {
	// ReleaseName and Namespace of the release; "" uses the defaults.
	ReleaseName string
	Namespace   string
	// KubeVersion of the target cluster, e.g. "v1.32.4"; "" uses
	// DefaultKubeVersion. The chart's kubeVersion constraint is checked
	// against it.
	KubeVersion string
	// APIVersions are extra API versions of the cluster offered to the
	// templates (.Capabilities.APIVersions), e.g. "monitoring.coreos.com/v1".
	APIVersions []string
	// IsUpgrade renders as for an upgrade (.Release.IsUpgrade).
	IsUpgrade bool
	// SkipSchemaValidation skips values.schema.json. Only for tests of the
	// templates' own checks.
	SkipSchemaValidation bool
}

// Manifest is one rendered Kubernetes object.
type Manifest struct {
	// Source is the template it came from, e.g.
	// "tuna-k8s-operator/templates/agent/rbac.yaml", or the CRD file.
	Source string
	// Content is the object's YAML, one document.
	Content string
	// Object is Content decoded.
	Object *unstructured.Unstructured
}

// Kind, Name and Namespace of the object.
func (m Manifest) Kind() string      { return m.Object.GetKind() }
func (m Manifest) Name() string      { return m.Object.GetName() }
func (m Manifest) Namespace() string { return m.Object.GetNamespace() }

// Component is the object's app.kubernetes.io/component label ("" for
// objects shared by both components, such as the IngressClass).
func (m Manifest) Component() string { return m.Object.GetLabels()[ComponentLabel] }

// Into decodes the object into a typed object of the client-go scheme,
// e.g. an *appsv1.Deployment.
func (m Manifest) Into(obj runtime.Object) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, obj)
}

// Typed decodes the object into its client-go type; it fails for kinds the
// client-go scheme does not know (ServiceMonitor, CRD).
func (m Manifest) Typed() (runtime.Object, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(m.Content), nil, nil)
	return obj, err
}

// Rendered is the chart rendered for some values.
type Rendered struct {
	// Manifests are the templates' objects in Helm's install order.
	Manifests []Manifest
	// CRDs are the chart's crds/ (Helm installs them before the release
	// and never upgrades them).
	CRDs []Manifest
	// Notes is the rendered NOTES.txt.
	Notes string
	// Values are the values the chart was rendered with: the chart's
	// defaults merged with the given values.
	Values map[string]any
	// Release is the Helm release of the client-only dry run.
	Release *releasev1.Release
}

// Render renders the chart for the given values (as -f/--set would give
// them: overrides of values.yaml) with the Helm 4 SDK, like `helm template`.
// It fails when the values break values.schema.json, when a template fails
// (e.g. not exactly one credentials source), or when the Kubernetes version
// is below the chart's kubeVersion.
func Render(values map[string]any, opts Options) (*Rendered, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	if opts.ReleaseName == "" {
		opts.ReleaseName = DefaultReleaseName
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = DefaultKubeVersion
	}
	kv, err := common.ParseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("kube version %q: %w", opts.KubeVersion, err)
	}
	if values == nil {
		values = map[string]any{}
	}

	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = opts.ReleaseName
	install.Namespace = opts.Namespace
	install.KubeVersion = kv
	install.APIVersions = common.VersionSet(opts.APIVersions)
	install.IsUpgrade = opts.IsUpgrade
	install.SkipSchemaValidation = opts.SkipSchemaValidation
	install.DisableHooks = true
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", Name, err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("rendering chart %s: unexpected release type %T", Name, rel)
	}
	if len(r.Hooks) > 0 {
		return nil, fmt.Errorf("rendering chart %s: the chart has hooks, which this package does not handle", Name)
	}

	out := &Rendered{Notes: r.Info.Notes, Release: r}
	if out.Manifests, err = splitManifests(r.Manifest); err != nil {
		return nil, err
	}
	for _, crd := range ch.CRDObjects() {
		ms, err := splitManifests(fmt.Sprintf("# Source: %s\n%s", crd.Filename, crd.File.Data))
		if err != nil {
			return nil, err
		}
		out.CRDs = append(out.CRDs, ms...)
	}
	if out.Values, err = mergedValues(ch, values); err != nil {
		return nil, err
	}
	return out, nil
}

func mergedValues(ch *chartv2.Chart, values map[string]any) (map[string]any, error) {
	// Helm's own merge of the chart's defaults with the given values, then a
	// deep copy through YAML: Values must alias neither the caller's map nor
	// the chart's defaults.
	merged, err := util.CoalesceValues(ch, values)
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(merged.AsMap())
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, yaml.Unmarshal(data, &out)
}

// splitManifests splits a multi-document stream with "# Source:" comments
// (Helm's release manifest) into decoded objects, keeping the order.
func splitManifests(stream string) ([]Manifest, error) {
	docs := releaseutil.SplitManifests(stream)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []Manifest
	source := ""
	for _, k := range keys {
		doc := docs[k]
		var body []string
		for _, line := range strings.Split(doc, "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = strings.TrimSpace(s)
				continue
			}
			body = append(body, line)
		}
		content := strings.TrimSpace(strings.Join(body, "\n")) + "\n"
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(content), &obj); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", source, err)
		}
		if len(obj) == 0 {
			continue // only comments
		}
		out = append(out, Manifest{Source: source, Content: content, Object: &unstructured.Unstructured{Object: obj}})
	}
	return out, nil
}

// YAML returns the manifests as one multi-document stream, each with its
// "# Source:" comment, as `helm template` prints them; with includeCRDs the
// CRDs come first.
func (r *Rendered) YAML(includeCRDs bool) string {
	var b strings.Builder
	ms := r.Manifests
	if includeCRDs {
		ms = append(append([]Manifest{}, r.CRDs...), r.Manifests...)
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s", m.Source, m.Content)
	}
	return b.String()
}

// Find returns the manifest of the given kind and name, or nil.
func (r *Rendered) Find(kind, name string) *Manifest {
	for i := range r.Manifests {
		if m := &r.Manifests[i]; m.Kind() == kind && m.Name() == name {
			return m
		}
	}
	return nil
}

// OfKind returns the manifests of one kind, in order.
func (r *Rendered) OfKind(kind string) []Manifest {
	var out []Manifest
	for _, m := range r.Manifests {
		if m.Kind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// Component returns the manifests labelled with the component
// (ComponentController or ComponentAgent).
func (r *Rendered) Component(component string) []Manifest {
	var out []Manifest
	for _, m := range r.Manifests {
		if m.Component() == component {
			out = append(out, m)
		}
	}
	return out
}

// Sources lists the template paths that produced objects, relative to the
// chart's templates/ folder, e.g. "agent/rbac.yaml".
func (r *Rendered) Sources() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range r.Manifests {
		s := strings.TrimPrefix(m.Source, path.Join(Name, "templates")+"/")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// ErrNotFound is returned when a rendered chart lacks an expected object.
var ErrNotFound = errors.New("not found in the rendered chart")
