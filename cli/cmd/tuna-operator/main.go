// Command tuna-operator is the companion CLI of the Tuna Kubernetes
// operator: render, validate, plan, install, upgrade and uninstall the
// embedded Helm chart, check a cluster before an install (preflight), and
// show the operator's resources (status). The program is cli/pkg/cmd; its
// version stamps are internal/version's.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Run(ctx, os.Args[1:], cmd.Env{})
	stop()
	os.Exit(code)
}
