package chart

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const (
	testEdgeURL = "https://edge.example.com:8443"
	// fullname of the default release (DefaultReleaseName + chart name).
	testFullname = "tuna-operator-tuna-k8s-operator"
)

// vals builds values from --set expressions, as `helm --set` would.
func vals(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, out); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	return out
}

// withKey is a minimal valid set of values: the edge URL and an API key.
func withKey(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	return vals(t, append([]string{"edge.apiURL=" + testEdgeURL, "credentials.apiKey=tuna_test_key"}, sets...)...)
}

func render(t *testing.T, values map[string]any) *Rendered {
	t.Helper()
	r, err := Render(values, Options{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// renderFails renders, expects an error, and checks that it contains every
// wanted fragment.
func renderFails(t *testing.T, values map[string]any, want ...string) {
	t.Helper()
	_, err := Render(values, Options{})
	if err == nil {
		t.Fatalf("render succeeded, want an error containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

func deployment(t *testing.T, r *Rendered, component string) *appsv1.Deployment {
	t.Helper()
	m := r.Find("Deployment", testFullname+"-"+component)
	if m == nil {
		t.Fatalf("no Deployment %s-%s; rendered: %v", testFullname, component, r.Sources())
	}
	var d appsv1.Deployment
	if err := m.Into(&d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return nil
}

func envNamed(c *corev1.Container, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func envNames(c *corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

func hasArg(c *corev1.Container, arg string) bool { return slices.Contains(c.Args, arg) }

func hasArgPrefix(c *corev1.Container, prefix string) bool {
	return slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, prefix) })
}

// allows reports whether rules grant verb on group/resource (optionally the
// object name), with RBAC's matching rules: "*" matches anything, and
// resourceNames, when set, limit the rule to those names (a request without
// a name, such as list, does not match such a rule).
func allows(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	match := func(list []string, v string) bool {
		return slices.Contains(list, "*") || slices.Contains(list, v)
	}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			continue
		}
		if !match(r.APIGroups, group) || !match(r.Resources, resource) || !match(r.Verbs, verb) {
			continue
		}
		if len(r.ResourceNames) > 0 && (name == "" || !slices.Contains(r.ResourceNames, name)) {
			continue
		}
		return true
	}
	return false
}

// grants flattens rules into "group/resource[:name]" -> sorted verbs, for
// exact comparison.
func grants(rules []rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				keys := []string{g + "/" + res}
				if len(r.ResourceNames) > 0 {
					keys = nil
					for _, n := range r.ResourceNames {
						keys = append(keys, g+"/"+res+":"+n)
					}
				}
				for _, k := range keys {
					out[k] = append(out[k], r.Verbs...)
				}
			}
		}
	}
	for k, v := range out {
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}

// volumeNamed returns the pod's volume called name, or nil.
func volumeNamed(d *appsv1.Deployment, name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// equality compares two pod templates as the API server would see them.
func equality(a, b corev1.PodTemplateSpec) bool { return apiequality.Semantic.DeepEqual(a, b) }
