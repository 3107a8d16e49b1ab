package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
)

// UninstallOptions of Uninstall.
type UninstallOptions struct {
	Release   string
	Namespace string
	// Timeout bounds the whole uninstall, the wait for finalizers included.
	Timeout time.Duration
	// DeleteCRDs deletes the operator's CRDs after the release.
	DeleteCRDs bool
	// IgnoreNotFound goes on when the release does not exist (the
	// resources and, with DeleteCRDs, the CRDs are still deleted).
	IgnoreNotFound bool
	Progress       io.Writer
	Debug          bool
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// ResourcesDeleted counts the Tunnels, SecretSyncs, Domains and
	// TCPEndpoints deleted.
	ResourcesDeleted int  `json:"resourcesDeleted"`
	ReleaseRemoved   bool `json:"releaseRemoved"`
	CRDsDeleted      bool `json:"crdsDeleted"`
}

// Uninstall removes the operator in the documented order (R28): every
// Tunnel and SecretSync, then every Domain and TCPEndpoint in all namespaces, waiting
// until their finalizers (run by the still installed operator) have
// revoked keys and released reservations; then the release; then, only
// with DeleteCRDs, the CRDs. When the resources do not go away within the
// timeout, the release is left in place so that the operator can finish.
func (m *Manager) Uninstall(ctx context.Context, o UninstallOptions) (*UninstallResult, error) {
	if o.Release == "" {
		o.Release = chart.DefaultReleaseName
	}
	if o.Namespace == "" {
		o.Namespace = chart.DefaultNamespace
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	deadline := time.Now().Add(o.Timeout)
	res := &UninstallResult{Release: o.Release, Namespace: o.Namespace}
	hopts := Options{Progress: o.Progress, Debug: o.Debug}
	cfg, err := m.helm(o.Namespace, hopts)
	if err != nil {
		return res, err
	}
	cur, err := current(cfg, o.Release)
	if err != nil {
		return res, err
	}
	if cur == nil && !o.IgnoreNotFound {
		return res, &Error{Invalid: true,
			Err:  fmt.Errorf("release %s not found in namespace %s", o.Release, o.Namespace),
			Hint: "give the release's --release and --namespace (helm list -A shows them), or pass --ignore-not-found to delete the resources (and with --delete-crds the CRDs) anyway"}
	}

	// A published LoadBalancer Service is the user's: the CLI never
	// changes it, and while it stays the operator would make its Tunnels
	// and TCPEndpoints again as fast as they are deleted.
	lbs, err := m.C.LoadBalancers(ctx, "")
	if err != nil {
		return res, err
	}
	if len(lbs) > 0 {
		var names []string
		for _, svc := range lbs {
			names = append(names, svc.Namespace+"/"+svc.Name)
		}
		return res, &Error{
			Err: fmt.Errorf("the operator publishes LoadBalancer Services %s; the release was not removed", strings.Join(names, ", ")),
			Hint: "delete them, or unpublish each with kubectl -n <namespace> patch service <name> --type=merge -p '{\"spec\":{\"type\":\"ClusterIP\",\"loadBalancerClass\":null}}', " +
				"while the operator still runs (their finalizer needs it), then run uninstall again"}
	}

	fmt.Fprintln(o.Progress, "deleting Tunnels and SecretSyncs, then Domains and TCPEndpoints, then AccessPolicies, in all namespaces")
	n, err := m.C.DeleteAll(ctx, o.Timeout, o.Progress)
	res.ResourcesDeleted = n
	if err != nil {
		var stuck *cluster.StuckError
		if errors.As(err, &stuck) {
			hint := "the operator runs the finalizers: check that its pods run (kubectl -n " + o.Namespace + " get pods), then run uninstall again, with a longer --timeout if needed. " +
				"To abandon the reservations on the edge, remove a finalizer by hand: kubectl -n <namespace> patch <kind> <name> --type=merge -p '{\"metadata\":{\"finalizers\":null}}'"
			if cur == nil {
				hint = "the release is not installed, so no operator runs the finalizers: install it again to let them finish, or remove them by hand: kubectl -n <namespace> patch <kind> <name> --type=merge -p '{\"metadata\":{\"finalizers\":null}}'"
			}
			return res, &Error{Err: fmt.Errorf("%w; the release was not removed", err), Hint: hint}
		}
		return res, err
	}
	if n == 0 {
		fmt.Fprintln(o.Progress, "no Tunnels, SecretSyncs, Domains, TCPEndpoints or AccessPolicies")
	} else {
		fmt.Fprintf(o.Progress, "all %d resources are gone\n", n)
	}

	if cur != nil {
		fmt.Fprintf(o.Progress, "uninstalling release %s from namespace %s\n", o.Release, o.Namespace)
		un := action.NewUninstall(cfg)
		un.WaitStrategy = kube.HookOnlyStrategy
		un.Timeout = time.Until(deadline)
		un.IgnoreNotFound = true
		if _, err := un.Run(o.Release); err != nil {
			return res, fmt.Errorf("uninstalling release %s: %w", o.Release, err)
		}
		res.ReleaseRemoved = true
		fmt.Fprintf(o.Progress, "release %s uninstalled\n", o.Release)
	}

	if o.DeleteCRDs {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		fmt.Fprintf(o.Progress, "deleting CRDs %s\n", strings.Join(cluster.CRDNames(), ", "))
		if err := m.C.DeleteCRDs(ctx, cluster.CRDNames(), o.Progress); err != nil {
			return res, err
		}
		res.CRDsDeleted = true
	} else {
		fmt.Fprintln(o.Progress, "CRDs kept (pass --delete-crds to delete them)")
	}
	return res, nil
}
