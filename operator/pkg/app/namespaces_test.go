package app

import (
	"strings"
	"testing"
)

// A bad --watch-namespaces stops the component at start with the flag's
// name, instead of silently serving nothing in the intended namespace.
func TestValidateNamespaces(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"team-a", "team-b"}, ""},
		{[]string{"Team_A"}, `--watch-namespaces: "Team_A" is not a namespace name`},
		{[]string{""}, `--watch-namespaces: "" is not a namespace name`},
		{[]string{"a", "a"}, `--watch-namespaces lists "a" twice`},
	} {
		err := validateNamespaces(tt.in)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validateNamespaces(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestCacheOptions(t *testing.T) {
	if o := cacheOptions(nil); o.DefaultNamespaces != nil {
		t.Errorf("no namespaces: the cache must span the cluster, got %v", o.DefaultNamespaces)
	}
	o := cacheOptions([]string{"a", "b"})
	if _, ok := o.DefaultNamespaces["a"]; !ok || len(o.DefaultNamespaces) != 2 {
		t.Errorf("cache namespaces = %v, want a and b", o.DefaultNamespaces)
	}
	if !watches(nil, "x") || !watches([]string{"a"}, "a") || watches([]string{"a"}, "x") {
		t.Error("watches disagrees with the list")
	}
}
