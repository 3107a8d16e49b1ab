// Command gen writes the chart's Grafana dashboards from package
// dashboards into chart/tuna-k8s-operator/dashboards/ (run by
// `go tool task generate`, from the repository's root).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"code.tuna.am/tuna/k8s-operator/chart/dashboards"
)

func main() {
	for _, f := range dashboards.Files {
		b, err := dashboards.JSON(f.Build)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dashboards:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.Join(dashboards.Dir, f.Name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dashboards:", err)
			os.Exit(1)
		}
	}
}
