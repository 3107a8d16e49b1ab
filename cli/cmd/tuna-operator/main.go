// Command tuna-operator is the companion CLI of the Tuna Kubernetes
// operator: render, validate, plan, install, upgrade and uninstall the
// embedded Helm chart, check a cluster before an install (preflight), and
// show the operator's resources (status). The program is cli/pkg/cmd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Run(ctx, os.Args[1:], cmd.Env{Version: version})
	stop()
	os.Exit(code)
}
