package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

const module = "code.tuna.am/tuna/k8s-operator/"

// publicEdge are the edge packages the operator and the CLI may import:
// the control API's wire format and client, the tunnel protocol and its
// client side (with the streams and channels it dials), the key format,
// and the access links' token format. Everything else of the edge is the
// server's (edge/internal/..., which Go itself keeps out of reach) or its
// binary's.
var publicEdge = []string{
	"edge/apiwire", "edge/client", "edge/protocol", "edge/tunnelclient",
	"edge/streams", "edge/chanconn", "edge/keys", "edge/access/link",
}

// edgeForTests may be imported by the operator's and the CLI's tests
// only: the in-process edge they run against, its metric names, and the
// DNS server its custom-domain checks ask.
var edgeForTests = []string{"edge/server", "edge/metrics", "edge/dnstest"}

// The operator and the CLI reach the edge through its public packages only
// (docs/architecture.md, "The edge's public surface"): a new import of any
// other edge package fails here, with the file that made it.
func TestOperatorAndCLIUseThePublicEdge(t *testing.T) {
	root := harness.RepoRoot()
	seen := 0
	for _, top := range []string{"operator", "cli"} {
		eachImport(t, root, top, func(rel, pkg string) {
			if !strings.HasPrefix(pkg, "edge/") {
				return
			}
			seen++
			allowed := slices.Contains(publicEdge, pkg) ||
				strings.HasSuffix(rel, "_test.go") && slices.Contains(edgeForTests, pkg)
			assert.True(t, allowed, "%s imports %s, which is not one of the edge's public packages %v (tests may also import %v)", rel, pkg, publicEdge, edgeForTests)
		})
	}
	require.NotZero(t, seen, "no import of the edge found: the walk looked in the wrong place")
}

// eachImport calls fn with each import of the repository's own packages
// (pkg relative to the module) by a Go file below dir, and the file's path
// relative to root.
func eachImport(t *testing.T, root, dir string, fn func(rel, pkg string)) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if pkg, ok := strings.CutPrefix(p, module); ok {
				fn(rel, pkg)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
