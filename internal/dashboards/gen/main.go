// Command gen writes the product's Grafana dashboards from package
// dashboards to their files (the chart's, the edge's; run by
// `go tool task generate`, from the repository's root).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"code.tuna.am/tuna/k8s-operator/internal/dashboards"
)

func main() {
	for _, f := range dashboards.Files {
		b, err := dashboards.JSON(f.Build)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dashboards:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.FromSlash(f.Path), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dashboards:", err)
			os.Exit(1)
		}
	}
}
