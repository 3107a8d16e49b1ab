package v1alpha1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	v1alpha1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// These tests run the committed CRDs (crds/) through the API server's own
// code, offline: the CRD validation a kube-apiserver does on create
// (including CEL compilation and cost limits), then pruning, defaulting,
// OpenAPI and CEL validation of custom resources, as on create and update.

// crdValidator validates custom resources of one kind like the API server.
type crdValidator struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var crdFiles = map[string]string{
	"Tunnel":       "k8s.tuna.am_tunnels.yaml",
	"Domain":       "k8s.tuna.am_domains.yaml",
	"TCPEndpoint":  "k8s.tuna.am_tcpendpoints.yaml",
	"SecretSync":   "k8s.tuna.am_secretsyncs.yaml",
	"AccessPolicy": "k8s.tuna.am_accesspolicies.yaml",
}

func loadCRD(t *testing.T, kind string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	path := filepath.Join(moduleRoot(t), "crds", crdFiles[kind])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the %s CRD: %v (run hack/generate.sh)", kind, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

func toInternal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsinternal.CustomResourceDefinition {
	t.Helper()
	in := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(in)
	out := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(in, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

func newValidator(t *testing.T, kind string) *crdValidator {
	t.Helper()
	crd := loadCRD(t, kind)
	internal := toInternal(t, crd)
	if len(internal.Spec.Versions) != 1 {
		t.Fatalf("%s CRD: want one version, got %d", kind, len(internal.Spec.Versions))
	}
	// With one version the conversion moves its schema to spec.validation.
	var props *apiextensionsinternal.JSONSchemaProps
	if sch := internal.Spec.Versions[0].Schema; sch != nil {
		props = sch.OpenAPIV3Schema
	} else if internal.Spec.Validation != nil {
		props = internal.Spec.Validation.OpenAPIV3Schema
	}
	if props == nil {
		t.Fatalf("%s CRD has no schema", kind)
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatalf("%s CRD schema is not structural: %v", kind, err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatalf("%s CRD schema: %v", kind, err)
	}
	return &crdValidator{crd: crd, structural: s, schema: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// validate defaults obj in place and returns the API server's errors for
// creating it (old == nil) or updating old to it. Unknown fields are errors,
// as with kubectl's default --validate=strict.
func (v *crdValidator) validate(obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	for _, p := range structuralpruning.PruneWithOptions(obj, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		errs = append(errs, field.Invalid(field.NewPath(p), p, "unknown field "+p))
	}
	structuraldefaulting.Default(obj, v.structural)
	if old != nil {
		old = runtime.DeepCopyJSON(old)
		structuraldefaulting.Default(old, v.structural)
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, v.schema)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, v.schema)...)
	}
	// The API server skips CEL rules while these errors stand.
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return errs
		}
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

func TestCRDsPassAPIServerValidation(t *testing.T) {
	for kind := range crdFiles {
		t.Run(kind, func(t *testing.T) {
			crd := loadCRD(t, kind)
			if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), toInternal(t, crd)); len(errs) > 0 {
				t.Errorf("the API server would refuse the %s CRD:\n%s", kind, errs.ToAggregate())
			}
			if crd.Spec.Group != v1alpha1.GroupVersion.Group || crd.Spec.Names.Kind != kind || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("%s CRD: group %q kind %q scope %q", kind, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope)
			}
			if !slices.Contains(crd.Spec.Names.Categories, "tuna") {
				t.Errorf("%s CRD: categories %v lack tuna", kind, crd.Spec.Names.Categories)
			}
			ver := crd.Spec.Versions[0]
			if ver.Name != v1alpha1.GroupVersion.Version || ver.Subresources == nil || ver.Subresources.Status == nil {
				t.Errorf("%s CRD: version %q needs the status subresource", kind, ver.Name)
			}
		})
	}
}

func TestPrinterColumnsAndShortNames(t *testing.T) {
	want := map[string]struct {
		columns    []string
		shortNames []string
	}{
		"Tunnel":      {[]string{"Protocol", "URL", "Ready", "Sessions", "Reason", "Upstream", "Age"}, []string{"tun"}},
		"Domain":      {[]string{"FQDN", "Ready", "Adopted", "Reason", "Age"}, nil},
		"TCPEndpoint": {[]string{"Address", "Ready", "Adopted", "Reason", "Age"}, []string{"tcpe"}},
	}
	for kind, w := range want {
		crd := loadCRD(t, kind)
		var got []string
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, c.Name)
			if c.Name == "Ready" && c.JSONPath != `.status.conditions[?(@.type=="Ready")].status` {
				t.Errorf("%s: Ready column reads %s", kind, c.JSONPath)
			}
			if c.Name == "Reason" && c.Priority != 1 {
				t.Errorf("%s: the Reason column should be priority 1 (-o wide)", kind)
			}
		}
		if !slices.Equal(got, w.columns) {
			t.Errorf("%s printer columns: got %v, want %v", kind, got, w.columns)
		}
		if !slices.Equal(crd.Spec.Names.ShortNames, w.shortNames) {
			t.Errorf("%s short names: got %v, want %v", kind, crd.Spec.Names.ShortNames, w.shortNames)
		}
	}
}

// Every property of every schema has a description, for kubectl explain.
func TestEveryFieldIsDescribed(t *testing.T) {
	for kind := range crdFiles {
		crd := loadCRD(t, kind)
		var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
			if s.Description == "" && path != "metadata" {
				t.Errorf("%s: %s has no description", kind, path)
			}
			for name, p := range s.Properties {
				walk(strings.TrimPrefix(path+"."+name, "."), &p)
			}
			if s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0 {
				for name, p := range s.Items.Schema.Properties {
					walk(path+"[]."+name, &p)
				}
			}
		}
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, top := range []string{"spec", "status"} {
			p := root.Properties[top]
			walk(top, &p)
		}
	}
}

func TestEnumsMatchGoConstants(t *testing.T) {
	enum := func(kind string, path ...string) []string {
		s := loadCRD(t, kind).Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, p := range path {
			next := s.Properties[p]
			s = &next
		}
		var out []string
		for _, e := range s.Enum {
			var v string
			if err := json.Unmarshal(e.Raw, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	check := func(name string, got []string, want ...string) {
		if !slices.Equal(got, want) {
			t.Errorf("%s enum: CRD has %v, Go constants %v", name, got, want)
		}
	}
	check("Tunnel protocol", enum("Tunnel", "spec", "protocol"), string(v1alpha1.ProtocolHTTP), string(v1alpha1.ProtocolTCP))
	check("Domain reclaimPolicy", enum("Domain", "spec", "reclaimPolicy"), string(v1alpha1.ReclaimDelete), string(v1alpha1.ReclaimRetain))
	check("TCPEndpoint reclaimPolicy", enum("TCPEndpoint", "spec", "reclaimPolicy"), string(v1alpha1.ReclaimDelete), string(v1alpha1.ReclaimRetain))
}

func TestSchemeRegistersKinds(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Tunnel", "TunnelList", "Domain", "DomainList", "TCPEndpoint", "TCPEndpointList"} {
		if !s.Recognizes(v1alpha1.GroupVersion.WithKind(kind)) {
			t.Errorf("AddToScheme does not register %s", kind)
		}
	}
}

// doc is one YAML document of an examples/ file.
type doc struct {
	file string
	raw  []byte
	obj  map[string]any
}

func (d doc) kind() string { s, _ := d.obj["kind"].(string); return s }
func (d doc) name() string {
	md, _ := d.obj["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}
func (d doc) isTuna() bool {
	s, _ := d.obj["apiVersion"].(string)
	return s == v1alpha1.GroupVersion.String()
}

func readDocs(t *testing.T, path string) []doc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []doc
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(j, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc{file: path, raw: raw, obj: obj})
	}
	return docs
}

func validators(t *testing.T) map[string]*crdValidator {
	t.Helper()
	vs := map[string]*crdValidator{}
	for kind := range crdFiles {
		vs[kind] = newValidator(t, kind)
	}
	return vs
}

// strictDecode checks that the document maps onto the Go types with no
// unknown field.
func strictDecode(t *testing.T, d doc) {
	t.Helper()
	var into any
	switch d.kind() {
	case "Tunnel":
		into = &v1alpha1.Tunnel{}
	case "Domain":
		into = &v1alpha1.Domain{}
	case "TCPEndpoint":
		into = &v1alpha1.TCPEndpoint{}
	case "SecretSync":
		into = &v1alpha1.SecretSync{}
	case "AccessPolicy":
		into = &v1alpha1.AccessPolicy{}
	default:
		t.Errorf("%s: unknown kind %q", d.file, d.kind())
		return
	}
	if err := yaml.UnmarshalStrict(d.raw, into); err != nil {
		t.Errorf("%s: %s %s does not decode into the Go type: %v", d.file, d.kind(), d.name(), err)
	}
}

func TestExamplesAreValid(t *testing.T) {
	vs := validators(t)
	files, _ := filepath.Glob(filepath.Join(moduleRoot(t), "examples", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no examples/*.yaml")
	}
	seen := map[string]bool{}
	for _, f := range files {
		for _, d := range readDocs(t, f) {
			if !d.isTuna() {
				continue
			}
			seen[d.kind()] = true
			strictDecode(t, d)
			v := vs[d.kind()]
			if v == nil {
				continue
			}
			if errs := v.validate(d.obj, nil); len(errs) > 0 {
				t.Errorf("%s: %s %s is refused:\n%s", filepath.Base(f), d.kind(), d.name(), errs.ToAggregate())
			}
		}
	}
	for kind := range crdFiles {
		if !seen[kind] {
			t.Errorf("no example of %s in examples/", kind)
		}
	}
}

var (
	expectRe   = regexp.MustCompile(`(?m)^# expect: (.+)$`)
	updateOfRe = regexp.MustCompile(`(?m)^# update-of: (.+)$`)
)

func TestInvalidExamplesAreRefused(t *testing.T) {
	vs := validators(t)
	files, _ := filepath.Glob(filepath.Join(moduleRoot(t), "examples", "invalid", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no examples/invalid/*.yaml")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := expectRe.FindSubmatch(text)
			if m == nil {
				t.Fatal(`no "# expect: <part of the error>" line`)
			}
			expect := strings.TrimSpace(string(m[1]))
			docs := readDocs(t, f)
			if len(docs) != 1 || !docs[0].isTuna() {
				t.Fatalf("want exactly one %s object, got %d documents", v1alpha1.GroupVersion, len(docs))
			}
			d := docs[0]
			var old map[string]any
			if u := updateOfRe.FindSubmatch(text); u != nil {
				base := filepath.Join(filepath.Dir(f), strings.TrimSpace(string(u[1])))
				for _, bd := range readDocs(t, base) {
					if bd.isTuna() && bd.kind() == d.kind() && bd.name() == d.name() {
						old = bd.obj
					}
				}
				if old == nil {
					t.Fatalf("update-of: %s has no %s %s", base, d.kind(), d.name())
				}
				if errs := vs[d.kind()].validate(runtime.DeepCopyJSON(old), nil); len(errs) > 0 {
					t.Fatalf("the object it updates is itself refused: %v", errs.ToAggregate())
				}
			}
			errs := vs[d.kind()].validate(d.obj, old)
			if len(errs) == 0 {
				t.Fatalf("accepted, want an error containing %q", expect)
			}
			if !strings.Contains(errs.ToAggregate().Error(), expect) {
				t.Fatalf("error %q does not contain %q", errs.ToAggregate(), expect)
			}
			t.Logf("refused: %s", errs.ToAggregate())
		})
	}
}

func TestReclaimPolicyDefaultsToDelete(t *testing.T) {
	vs := validators(t)
	for kind, spec := range map[string]map[string]any{
		"Domain":      {"subdomain": "a"},
		"TCPEndpoint": {"alias": "a"},
	} {
		obj := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": kind, "metadata": map[string]any{"name": "x"}, "spec": spec}
		if errs := vs[kind].validate(obj, nil); len(errs) > 0 {
			t.Fatalf("%s: %v", kind, errs.ToAggregate())
		}
		if got := spec["reclaimPolicy"]; got != string(v1alpha1.ReclaimDelete) {
			t.Errorf("%s: reclaimPolicy defaulted to %v, want Delete", kind, got)
		}
	}
}
