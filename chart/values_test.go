package chart

import (
	"encoding/json"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/chart/common"
)

// Bad values are rejected by values.schema.json through the Helm SDK's own
// schema validation, before any template runs.
func TestSchemaRejectsBadValues(t *testing.T) {
	const schemaErr = "values don't meet the specifications of the schema"
	tests := []struct {
		name string
		sets []string
		raw  map[string]any
		want string
	}{
		{name: "unknown top-level key", sets: []string{"replicaCount=2"}, want: "replicaCount"},
		{name: "misspelt credentials key", sets: []string{"credentials.apikey=k"}, want: "apikey"},
		{name: "unknown agentManager key", sets: []string{"agentManager.replica=2"}, want: "replica"},
		{name: "agent replicas below one", sets: []string{"agentManager.replicas=0"}, want: "/agentManager/replicas"},
		{name: "drainGrace not in whole seconds", sets: []string{"agentManager.drainGrace=1m"}, want: "/agentManager/drainGrace"},
		{name: "wrong type: replicas", sets: []string{"controller.replicas=two"}, want: "/controller/replicas"},
		{name: "wrong type: boolean", raw: map[string]any{"agentManager": map[string]any{"allowExternalUpstreams": "yes"}}, want: "/agentManager/allowExternalUpstreams"},
		{name: "wrong type: podAnnotations value", raw: map[string]any{"podAnnotations": map[string]any{"a": 1}}, want: "/podAnnotations/a"},
		{name: "wrong type: extraEnv", raw: map[string]any{"extraEnv": map[string]any{"TUNA_API_KEY": "x"}}, want: "/extraEnv"},
		{name: "bad enum: pullPolicy", sets: []string{"image.pullPolicy=Sometimes"}, want: "/image/pullPolicy"},
		{name: "extraEnv entry without name", raw: map[string]any{"extraEnv": []any{map[string]any{"value": "x"}}}, want: "/extraEnv/0"},
		{name: "extraEnv entry with an unknown field", raw: map[string]any{"extraEnv": []any{map[string]any{"name": "A", "valu": "x"}}}, want: "valu"},
		{name: "edge URL without scheme", sets: []string{"edge.apiURL=edge.example.com"}, want: "/edge/apiURL"},
		{name: "bad duration", sets: []string{"agentManager.keepaliveInterval=15 seconds"}, want: "/agentManager/keepaliveInterval"},
		{name: "negative replicas", sets: []string{"controller.replicas=-1"}, want: "/controller/replicas"},
		{name: "bad Secret name", sets: []string{"credentials.existingSecret=My_Secret"}, want: "/credentials/existingSecret"},
		{name: "bad namespace in watchNamespaces", sets: []string{"watchNamespaces={Team_A}"}, want: "/watchNamespaces/0"},
		{name: "namespace listed twice", sets: []string{"watchNamespaces={a,a}"}, want: "/watchNamespaces"},
		{name: "watchNamespaces as a string", raw: map[string]any{"watchNamespaces": "a,b"}, want: "/watchNamespaces"},
		{name: "unknown resources key", sets: []string{"controller.resources.limit.cpu=1"}, want: "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := withKey(t, tt.sets...)
			for k, v := range tt.raw {
				values[k] = v
			}
			renderFails(t, values, schemaErr, tt.want)
		})
	}
	// Schema validation is the SDK's: skipping it lets the same values through
	// to the templates.
	if _, err := Render(withKey(t, "replicaCount=2"), Options{SkipSchemaValidation: true}); err != nil {
		t.Errorf("unknown key without schema validation: %v", err)
	}
}

func readChartFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := fs.ReadFile(Files(), name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Nelm validates with JSON Schema draft-07: the schema declares it and uses
// no keyword of later drafts.
func TestSchemaIsDraft07(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(readChartFile(t, "values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	if schema["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema = %v", schema["$schema"])
	}
	later := []string{"$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "unevaluatedProperties",
		"unevaluatedItems", "dependentRequired", "dependentSchemas", "prefixItems", "minContains", "maxContains"}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if slices.Contains(later, k) {
					t.Errorf("%s uses %s, not in draft-07", at, k)
				}
				if k == "$ref" && !strings.HasPrefix(c.(string), "#/definitions/") {
					t.Errorf("%s: $ref %v is not local", at, c)
				}
				walk(c, at+"/"+k)
			}
		case []any:
			for _, c := range v {
				walk(c, at)
			}
		}
	}
	walk(schema, "#")
	if schema["additionalProperties"] != false {
		t.Error("the schema accepts unknown top-level keys")
	}
}

// No null anywhere in values.yaml: Nelm (and Helm) treat null as "delete the
// key", so defaults are "", {} or [].
func TestValuesYAMLHasNoNull(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(readChartFile(t, "values.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, at+"["+itoa(i)+"]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], strings.TrimPrefix(at+"."+n.Content[i].Value, "[0]."))
			}
		case yaml.ScalarNode:
			if n.Tag == "!!null" {
				t.Errorf("%s is null (line %d): use \"\", {} or []", at, n.Line)
			}
		case yaml.AliasNode:
			t.Errorf("%s is an alias (line %d)", at, n.Line)
		}
	}
	walk(&doc, "")
	// The same through Helm's own reader.
	vals, err := common.ReadValues(readChartFile(t, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var nulls func(v any, at string)
	nulls = func(v any, at string) {
		switch v := v.(type) {
		case nil:
			t.Errorf("%s is null", at)
		case map[string]any:
			for k, c := range v {
				nulls(c, at+"."+k)
			}
		case []any:
			for _, c := range v {
				nulls(c, at)
			}
		}
	}
	nulls(map[string]any(vals), "")
}

func itoa(i int) string { return strconv.Itoa(i) }

// Every value in values.yaml has a comment, is declared in the schema with a
// type, and every value the schema declares has a default in values.yaml.
// Kubernetes objects (resources, nodeSelector, affinity, ...: free-form or
// a $ref in the schema) are documented as a whole.
func TestValuesDocumented(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(readChartFile(t, "values.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(readChartFile(t, "values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	defs := schema["definitions"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			return defs[path.Base(ref)].(map[string]any)
		}
		return s
	}
	checked := 0
	var walk func(n *yaml.Node, s map[string]any, at string)
	walk = func(n *yaml.Node, s map[string]any, at string) {
		props, _ := s["properties"].(map[string]any)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := strings.TrimPrefix(at+"."+k.Value, ".")
			seen[k.Value] = true
			checked++
			if strings.TrimSpace(k.HeadComment) == "" && strings.TrimSpace(k.LineComment) == "" {
				t.Errorf("values.yaml: %s (line %d) has no comment", key, k.Line)
			}
			ps, ok := props[k.Value].(map[string]any)
			if !ok {
				t.Errorf("values.yaml: %s is not in values.schema.json", key)
				continue
			}
			_, isRef := ps["$ref"]
			ps = resolve(ps)
			if _, typed := ps["type"]; !typed {
				t.Errorf("values.schema.json: %s has no type", key)
			}
			// A $ref is a Kubernetes type (resources, ...): documented whole.
			if v.Kind == yaml.MappingNode && !isRef {
				if _, ok := ps["properties"]; ok {
					walk(v, ps, key)
				}
			}
		}
		for name, p := range props {
			// A removed value stays declared, deprecated, so the chart can
			// fail with where it went rather than with the schema's
			// generic refusal.
			if d, _ := p.(map[string]any)["deprecated"].(bool); d {
				continue
			}
			if !seen[name] && (at != "" || name != "global") {
				t.Errorf("values.schema.json declares %s.%s, which values.yaml lacks", at, name)
			}
		}
	}
	walk(doc.Content[0], schema, "")
	if checked < 30 {
		t.Errorf("only %d values checked", checked)
	}
}

// The examples render (each credentials mode), and the podinfo example
// publishes an Ingress of class tuna.
func TestExamples(t *testing.T) {
	entries, err := fs.ReadDir(Files(), "examples")
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "values-") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			values, err := common.ReadValues(readChartFile(t, "examples/"+name))
			if err != nil {
				t.Fatal(err)
			}
			r := render(t, values)
			d := deployment(t, r, "controller")
			ctrl := container(t, d, "controller")
			// The key comes from a mounted file or from TUNA_API_KEY, never both.
			file, env := hasArgPrefix(ctrl, "--api-key-file="), len(envNamed(ctrl, "TUNA_API_KEY")) == 1
			if file == env {
				t.Fatalf("key file %t, TUNA_API_KEY %t: want exactly one (env %v, args %v)", file, env, envNames(ctrl), ctrl.Args)
			}
			switch {
			case r.Find("Secret", testFullname+"-api-key") != nil:
				modes["apiKey"] = true
			case file:
				modes["existingSecret"] = true
			default:
				modes["extraEnv"] = true
			}
		})
	}
	if len(modes) != 3 {
		t.Errorf("examples cover credentials modes %v, want all three", modes)
	}
	var podinfo struct {
		Ingress struct {
			Enabled   bool   `json:"enabled"`
			ClassName string `json:"className"`
			Hosts     []struct {
				Host string `json:"host"`
			} `json:"hosts"`
		} `json:"ingress"`
	}
	if err := yamlStrict(readChartFile(t, "examples/podinfo-values.yaml"), &podinfo); err != nil {
		t.Fatal(err)
	}
	if !podinfo.Ingress.Enabled || podinfo.Ingress.ClassName != "tuna" || len(podinfo.Ingress.Hosts) == 0 {
		t.Errorf("podinfo example: %+v", podinfo.Ingress)
	}
}

func yamlStrict(data []byte, into any) error {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return err
	}
	j, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(j, into)
}

func TestChartMetadata(t *testing.T) {
	ch, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	md := ch.Metadata
	if md.APIVersion != "v2" || md.Name != Name || md.Version != "0.1.0" || md.AppVersion == "" || md.KubeVersion != ">=1.32.0-0" {
		t.Errorf("Chart.yaml = %+v", md)
	}
	if err := md.Validate(); err != nil {
		t.Error(err)
	}
	if ch.Schema == nil {
		t.Error("no values.schema.json loaded")
	}
	var files []string
	for _, f := range ch.Files {
		files = append(files, f.Name)
	}
	for _, want := range []string{"README.md", "crds/k8s.tuna.am_tunnels.yaml", "dashboards/tuna-k8s-operator.json", "examples/values-api-key.yaml"} {
		if !slices.Contains(files, want) {
			t.Errorf("chart lacks %s: %v", want, files)
		}
	}
	var tpls []string
	for _, f := range ch.Templates {
		tpls = append(tpls, f.Name)
	}
	if !slices.Contains(tpls, "templates/_helpers.tpl") || !slices.Contains(tpls, "templates/NOTES.txt") {
		t.Errorf("templates = %v (the embed must include files starting with _)", tpls)
	}
}
