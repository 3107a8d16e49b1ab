package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// `kubectl explain tunnel.spec`, `domain.spec` and `tcpendpoint.spec`, run
// with the real kubectl against the real apiserver, document every field of
// the Go types (R11).
func TestKubectlExplainDocumentsEveryField(t *testing.T) {
	bin, err := harness.Tools()
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, env.CP.WriteKubeconfig(kubeconfig))

	for resource, spec := range map[string]any{
		"tunnel.spec":      tunav1.TunnelSpec{},
		"domain.spec":      tunav1.DomainSpec{},
		"tcpendpoint.spec": tunav1.TCPEndpointSpec{},
	} {
		t.Run(resource, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(bin, "kubectl"), "explain", resource)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			described := explainedFields(string(out))
			for _, field := range jsonFields(reflect.TypeOf(spec)) {
				desc, ok := described[field]
				if assert.True(t, ok, "kubectl explain %s does not list %s:\n%s", resource, field, out) {
					assert.GreaterOrEqual(t, len(desc), 20, "field %s.%s needs a description", resource, field)
				}
			}
		})
	}
}

// explainedFields parses the FIELDS section of kubectl explain: a field line
// "  name\t<type>" followed by indented description lines.
func explainedFields(out string) map[string]string {
	fields := map[string]string{}
	_, section, _ := strings.Cut(out, "FIELDS:")
	var current string
	for _, line := range strings.Split(section, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "enum:"):
			// "  enum: http, tcp" belongs to the field above.
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") && trimmed != "":
			current = strings.Fields(trimmed)[0]
			fields[current] = ""
		case current != "" && trimmed != "":
			fields[current] += trimmed + " "
		}
	}
	return fields
}

func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
