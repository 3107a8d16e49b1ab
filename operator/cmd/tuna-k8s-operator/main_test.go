package main

import (
	"bytes"
	"testing"

	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// TestVersion checks that `version` and `--version` report the stamps of
// internal/version (internal/version's tests build a stamped binary).
func TestVersion(t *testing.T) {
	saved := version.Version
	t.Cleanup(func() { version.Version = saved })
	version.Version = "v9.8.7"
	want := "tuna-k8s-operator " + version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		cmd := root()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}
}
