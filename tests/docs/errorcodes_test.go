package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// docs/edge.md's list of the API's error codes names, once each, every
// code the edge answers with (an apiwire.Code* constant that edge code
// outside apiwire uses), and nothing else.
func TestEdgeErrorCodesListed(t *testing.T) {
	root := harness.RepoRoot()
	constants := map[string]string{} // name -> code
	def := regexp.MustCompile(`(?m)^\s*(Code[A-Za-z]+)\s*=\s*"([a-z_]+)"`)
	files, err := filepath.Glob(filepath.Join(root, "edge", "apiwire", "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range def.FindAllStringSubmatch(string(src), -1) {
			constants[m[1]] = m[2]
		}
	}
	require.NotEmpty(t, constants)
	used := map[string]bool{}
	ref := regexp.MustCompile(`apiwire\.(Code[A-Za-z]+)\b`)
	err = filepath.WalkDir(filepath.Join(root, "edge"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Dir(path) == filepath.Join(root, "edge", "apiwire") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			if code, ok := constants[m[1]]; ok {
				used[code] = true
			}
		}
		return err
	})
	require.NoError(t, err)

	doc, err := os.ReadFile(filepath.Join(root, "docs", "edge.md"))
	require.NoError(t, err)
	text := string(doc)
	i := strings.Index(text, "\nError codes: ")
	require.GreaterOrEqual(t, i, 0, "docs/edge.md has no \"Error codes:\" paragraph")
	para := text[i+1:]
	para = para[:strings.Index(para, "\n\n")]
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z]+(?:_[a-z]+)*)`").FindAllStringSubmatch(para, -1) {
		if slices.Contains(listed, m[1]) {
			t.Errorf("docs/edge.md lists the error code %s twice", m[1])
		}
		listed = append(listed, m[1])
	}
	codes := map[string]bool{}
	for _, c := range constants {
		codes[c] = true
	}
	for c := range used {
		assert.Contains(t, listed, c, "docs/edge.md's error codes do not name %s, which the API answers with", c)
	}
	for _, c := range listed {
		if c == "owner" { // the field the address_owned error carries
			continue
		}
		assert.True(t, used[c], "docs/edge.md names the error code %s, which the edge never answers with", c)
	}
}
