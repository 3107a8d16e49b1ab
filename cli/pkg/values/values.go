// Package values reads the chart values of a tuna-operator command line
// (-f/--values and --set, --set-string, --set-json, --set-file, exactly as
// Helm merges them) and renders the embedded chart with them, turning the
// chart's failures into messages that say what to change.
package values

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	helmvalues "helm.sh/helm/v4/pkg/cli/values"

	"code.tuna.am/tuna/k8s-operator/chart"
)

// Flags are the value flags of Helm.
type Flags struct {
	Files        []string
	Values       []string
	StringValues []string
	JSONValues   []string
	FileValues   []string
}

// AddFlags registers the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.Files, "values", "f", nil, "a values YAML file (repeatable; later files win; - reads stdin)")
	fs.StringArrayVar(&f.Values, "set", nil, "set a value, e.g. --set credentials.existingSecret=tuna-api-key (repeatable; Helm syntax: a.b=c,d.e=f)")
	fs.StringArrayVar(&f.StringValues, "set-string", nil, "set a value as a string, e.g. --set-string clusterID=0123 (repeatable)")
	fs.StringArrayVar(&f.JSONValues, "set-json", nil, `set a value from JSON, e.g. --set-json 'extraEnv=[{"name":"TUNA_API_KEY","value":"vault:secret/data/tuna#api-key"}]' (repeatable)`)
	fs.StringArrayVar(&f.FileValues, "set-file", nil, "set a value from a file's content, e.g. --set-file credentials.apiKey=./key.txt (repeatable)")
}

// Load merges the values in Helm's order: files, then --set-json, --set,
// --set-string, --set-file.
func (f *Flags) Load() (map[string]any, error) {
	o := helmvalues.Options{
		ValueFiles:   f.Files,
		Values:       f.Values,
		StringValues: f.StringValues,
		JSONValues:   f.JSONValues,
		FileValues:   f.FileValues,
	}
	v, err := o.MergeValues(nil)
	if err != nil {
		return nil, &InvalidError{Problems: []string{err.Error()}, Hint: "fix the -f file or the --set expression (Helm syntax: --set a.b=c, lists as --set 'a={x,y}' or --set a[0].name=x)"}
	}
	return v, nil
}

// InvalidError is a render refused because of the values (schema, the
// chart's rules) or the cluster's version. Problems are one line each.
type InvalidError struct {
	Problems []string
	Hint     string
}

func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid values: " + e.Problems[0]
	}
	return "invalid values:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// IsInvalid reports whether err is an InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Render renders the embedded chart (chart.Render) and returns its failures
// as an *InvalidError with readable problems.
func Render(vals map[string]any, opts chart.Options) (*chart.Rendered, error) {
	r, err := chart.Render(vals, opts)
	if err != nil {
		return nil, Readable(err)
	}
	return r, nil
}

var (
	schemaLine   = regexp.MustCompile(`^- at '([^']*)': (.*)$`)
	execError    = regexp.MustCompile(`execution error at \([^)]*\): (.*)$`)
	kubeVersionE = regexp.MustCompile(`chart requires kubeVersion: (\S+) which is incompatible with Kubernetes (\S+)`)
)

// Readable turns an error of chart.Render into an *InvalidError whose
// problems name the value and say what to change.
func Readable(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "rendering chart "+chart.Name+": ")
	switch {
	case strings.Contains(msg, "don't meet the specifications of the schema"):
		var problems []string
		for _, line := range strings.Split(msg, "\n") {
			m := schemaLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			path := strings.ReplaceAll(strings.TrimPrefix(m[1], "/"), "/", ".")
			if path == "" {
				path = "(top level)"
			}
			problems = append(problems, fmt.Sprintf("%s: %s", path, m[2]))
		}
		if len(problems) == 0 {
			problems = []string{msg}
		}
		return &InvalidError{Problems: problems, Hint: "the chart's values.schema.json rejects these values: fix or remove them (`tuna-operator render --help` shows how values are given; the chart's values.yaml documents every value)"}
	case execError.MatchString(msg):
		m := execError.FindStringSubmatch(msg)
		return &InvalidError{Problems: []string{m[1]}, Hint: rulesHint}
	case kubeVersionE.MatchString(msg):
		m := kubeVersionE.FindStringSubmatch(msg)
		return &InvalidError{
			Problems: []string{fmt.Sprintf("the chart needs Kubernetes %s, the target is %s", m[1], m[2])},
			Hint:     "upgrade the cluster to Kubernetes 1.32 or newer (or pass --kube-version to render for another version)",
		}
	}
	return &InvalidError{Problems: []string{msg}, Hint: rulesHint}
}

// rulesHint ends a refusal by the chart's own rules, whose messages name
// the value and what to set.
const rulesHint = "change the values as the message says (the chart's values.yaml documents every value; `tuna-operator render --help` shows how values are given)"

// Get returns the value at a dotted path of a values map, or nil.
func Get(vals map[string]any, path string) any {
	var cur any = vals
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// String returns the string at a dotted path, "" when absent.
func String(vals map[string]any, path string) string {
	s, _ := Get(vals, path).(string)
	return s
}

// Bool returns the bool at a dotted path, false when absent.
func Bool(vals map[string]any, path string) bool {
	b, _ := Get(vals, path).(bool)
	return b
}

// MergeOverride returns a deep copy of vals with the value at a dotted path
// set (as --set would).
func MergeOverride(vals map[string]any, path string, v any) map[string]any {
	out := deepCopy(vals)
	cur := out
	parts := strings.Split(path, ".")
	for _, k := range parts[:len(parts)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = v
	return out
}

func deepCopy(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, x := range v {
		if m, ok := x.(map[string]any); ok {
			out[k] = deepCopy(m)
		} else {
			out[k] = x
		}
	}
	return out
}
