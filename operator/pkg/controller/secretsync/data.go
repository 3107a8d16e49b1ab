package secretsync

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// maxSecretBytes bounds what one target Secret may hold: Kubernetes refuses
// Secrets over 1 MiB, and a template could multiply its inputs.
const maxSecretBytes = 1 << 20

// BuildError is a spec that cannot be applied to the edge's data; Reason is
// the condition reason that says what to fix.
type BuildError struct {
	Reason  string
	Message string
}

func (e *BuildError) Error() string { return e.Message }

func buildErr(reason, format string, args ...any) *BuildError {
	return &BuildError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Build computes the target Secret's data from the edge secrets (sorted by
// name) and the target spec: the merged keys of every source, narrowed and
// renamed by target.keys when set, plus target.template's computed keys.
func Build(sources []apiwire.Secret, target tunav1.SecretSyncTarget) (map[string][]byte, error) {
	merged := map[string][]byte{}
	from := map[string]string{}
	for _, s := range sources {
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			if other, ok := from[k]; ok {
				return nil, buildErr(tunav1.ReasonKeyConflict,
					"edge secrets %s and %s both have the key %q, and one Secret cannot hold both: rename the key in one of them, or sync them with two SecretSyncs (source.name)",
					other, s.Name, k)
			}
			merged[k], from[k] = s.Data[k], s.Name
		}
	}
	out := map[string][]byte{}
	if len(target.Keys) == 0 {
		maps.Copy(out, merged)
	}
	for _, m := range target.Keys {
		v, ok := merged[m.From]
		if !ok {
			return nil, buildErr(tunav1.ReasonKeyNotFound,
				"target.keys names the key %q, which the edge secret(s) %s do not have (they have: %s)",
				m.From, names(sources), strings.Join(slices.Sorted(maps.Keys(merged)), ", "))
		}
		to := m.To
		if to == "" {
			to = m.From
		}
		out[to] = v
	}
	for _, k := range slices.Sorted(maps.Keys(target.Template)) {
		v, err := render(k, target.Template[k], merged)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	size := 0
	for k, v := range out {
		size += len(k) + len(v)
	}
	if size > maxSecretBytes {
		return nil, buildErr(tunav1.ReasonTemplateFailed,
			"the Secret would hold %d bytes, more than Kubernetes allows (%d): take fewer keys or shorten the templates", size, maxSecretBytes)
	}
	return out, nil
}

// funcs are the template functions: text only, nothing that reads the
// environment, files or the network.
var funcs = template.FuncMap{
	"b64enc": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"b64dec": func(s string) (string, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"trim":  strings.TrimSpace,
	"quote": strconv.Quote,
}

// render runs one template over the values as strings. A key the data does
// not have is an error: an empty password in a DSN is worse than no DSN.
func render(key, text string, data map[string][]byte) ([]byte, error) {
	t, err := template.New(key).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, buildErr(tunav1.ReasonTemplateFailed, "target.template[%s] does not parse: %v", key, err)
	}
	values := make(map[string]string, len(data))
	for k, v := range data {
		values[k] = string(v)
	}
	var buf bytes.Buffer
	if err := t.Execute(&limitedWriter{w: &buf, left: maxSecretBytes}, values); err != nil {
		return nil, buildErr(tunav1.ReasonTemplateFailed, "target.template[%s] failed: %s", key, withheld(err))
	}
	return buf.Bytes(), nil
}

// withheld is a template error fit for status, which more people read
// than the Secret: text/template quotes the values it fails on, so only the
// place in the template and the kinds of error that name no value are
// kept.
func withheld(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "map has no entry for key") || strings.Contains(msg, "output is larger than") ||
		strings.Contains(msg, "not defined") {
		return msg
	}
	if i := strings.Index(msg, ">: "); i >= 0 {
		msg = msg[:i+1]
	}
	return msg + " (the rest of the error is withheld: it may quote a secret value)"
}

// limitedWriter stops a template that writes without end.
type limitedWriter struct {
	w    *bytes.Buffer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.left {
		return 0, fmt.Errorf("output is larger than %d bytes", maxSecretBytes)
	}
	l.left -= len(p)
	return l.w.Write(p)
}

func names(sources []apiwire.Secret) string {
	n := make([]string, len(sources))
	for i, s := range sources {
		n[i] = s.Name
	}
	return strings.Join(n, ", ")
}

// Versions sums up which versions a Secret holds: "3" for one source,
// "a@3,b@1" for several (sorted by name, as sources are).
func Versions(sources []tunav1.SyncedSecret) string {
	if len(sources) == 1 {
		return strconv.FormatInt(sources[0].Version, 10)
	}
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = s.Name + "@" + strconv.FormatInt(s.Version, 10)
	}
	return strings.Join(parts, ",")
}
