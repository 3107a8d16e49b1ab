package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	table := "NAME   PROTOCOL   URL                                 READY   SESSIONS   AGE\n" +
		"web    http       http://my-app.tuna.localhost:8080   True    2          5s\n"
	for _, tc := range []struct {
		name, want, got string
		any             []string
		ok              bool
	}{
		{"a table aligned otherwise, another age", table,
			"NAME  PROTOCOL  URL                                READY  SESSIONS  AGE\nweb   http      http://my-app.tuna.localhost:8080  True   2         3m10s\n", nil, true},
		{"another cell", table,
			"NAME   PROTOCOL   URL                                 READY   SESSIONS   AGE\nweb    http       http://my-app.tuna.localhost:8080   False   0          5s\n", nil, false},
		{"that column not compared", table,
			"NAME   PROTOCOL   URL                                 READY   SESSIONS   AGE\nweb    http       http://my-app.tuna.localhost:8080   True    1          5s\n", []string{"SESSIONS"}, true},
		{"a row more", table, table + "api    http       http://api.tuna.localhost:8080      True    2          5s\n", nil, false},
		{"another column", table, "NAME   PROTOCOL   URL   READY   AGE\nweb    http       x     True    5s\n", nil, false},
		{"cells with spaces", "KIND     NAME  ADDRESS                      READY\nService  db    127.0.0.1 (5432), db.x (80)  True\n",
			"KIND     NAME  ADDRESS                          READY\nService  db    127.0.0.1 (5432), db.x (80)      True\n", nil, true},
		{"the edge's TCP ports", "tcp://127.0.0.1:31337\n", "tcp://127.0.0.1:29001\n", nil, true},
		{"TCP ports of another width in a table", "NAME  URL                    READY\nx     tcp://127.0.0.1:31337  True\n",
			"NAME  URL                   READY\nx     tcp://127.0.0.1:9001  True\n", nil, true},
		{"lines, spaces collapsed", "Error: invalid values:\n  - a: b\n", "Error: invalid values:\n    - a:   b\n", nil, true},
		{"another line", "Error: x\n", "Error: y\n", nil, false},
		{"a line ending in ...", "Hint: fix them ...\n", "Hint: fix them (see --help)\n", nil, true},
		{"a prefix that is not", "Hint: fix them ...\n", "Hint: break them\n", nil, false},
		{"... for any lines", "Hello\n...\n", "Hello\nHost: x\nPath: /\n", nil, true},
		{"more lines than shown", "Hello\n", "Hello\nmore\n", nil, false},
		{"fewer lines than shown", "Hello\nHost: x\n", "Hello\n", nil, false},
		{"sections", "A\n\nNAME  READY\nx     True\n", "A\n\nNAME  READY\nx     True\n", nil, true},
		{"a section more", "A\n", "A\n\nB\n", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := matcher{any: tc.any}.match(tc.want, tc.got)
			assert.Equal(t, tc.ok, err == nil, "%v", err)
		})
	}
}

func TestParseDoc(t *testing.T) {
	dir := t.TempDir()
	doc := "# T\n\n<!-- snippet: apply -->\n```yaml\na: 1\n```\n\n- item\n\n  <!-- snippet: output; any: AGE, X; once -->\n  ```console\n  $ echo a \\\n    b\n  a b\n  ```\n\n" +
		"```sh\nunmarked\n```\n\n<!-- snippet: not run: needs a real DNS provider -->\n```\nx\n```\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d.md"), []byte(doc), 0o600))
	s, err := parseDoc(dir, "d.md")
	require.NoError(t, err)
	require.Len(t, s, 4)
	assert.Equal(t, []any{modeApply, "yaml", "a: 1\n", 4}, []any{s[0].mode, s[0].lang, s[0].body, s[0].line})
	assert.Equal(t, []any{modeOutput, []string{"AGE", "X"}, true, "$ echo a \\\n  b\na b\n"}, []any{s[1].mode, s[1].any, s[1].once, s[1].body})
	cmds, err := commands(s[1].body)
	require.NoError(t, err)
	assert.Equal(t, []command{{cmd: "echo a \n  b", want: "a b\n"}}, cmds)
	assert.Equal(t, "", s[2].mode, "a block without a marker")
	assert.Equal(t, []any{modeNotRun, "needs a real DNS provider"}, []any{s[3].mode, s[3].why})

	for _, bad := range []string{"<!-- snippet: launch -->", "<!-- snippet: not run: -->", "<!-- snippet: output; sometimes -->"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.md"), []byte(bad+"\n```\nx\n```\n"), 0o600))
		_, err := parseDoc(dir, "bad.md")
		assert.Error(t, err, bad)
	}
}
