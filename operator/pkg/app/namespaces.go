package app

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// validateNamespaces checks --watch-namespaces: names of namespaces, each
// once. A typo here would silently serve nothing in the intended namespace.
func validateNamespaces(namespaces []string) error {
	seen := map[string]bool{}
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if seen[ns] {
			return fmt.Errorf("--watch-namespaces lists %q twice: list each namespace once", ns)
		}
		seen[ns] = true
	}
	return nil
}

// cacheOptions restricts the informers of namespaced kinds to the watched
// namespaces; cluster-scoped kinds (IngressClasses) are cached whole, as
// before. No namespaces: the cache spans the cluster.
func cacheOptions(namespaces []string) cache.Options {
	if len(namespaces) == 0 {
		return cache.Options{}
	}
	def := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		def[ns] = cache.Config{}
	}
	return cache.Options{DefaultNamespaces: def}
}

// watches reports whether a component limited to namespaces (none: all)
// handles objects of ns.
func watches(namespaces []string, ns string) bool {
	return len(namespaces) == 0 || slices.Contains(namespaces, ns)
}
