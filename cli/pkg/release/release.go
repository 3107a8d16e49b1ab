// Package release installs, upgrades, plans and uninstalls the operator's
// Helm release with the Helm 4 SDK and the embedded chart. CRDs are applied
// first, with server-side apply as field manager "helm" (R27), because Helm
// never upgrades crds/; uninstall deletes the operator's resources first,
// while the operator can still run their finalizers (R28).
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

func init() {
	// Every object Helm applies is owned by the field manager "helm", as
	// with the helm command (R27).
	kube.ManagedFieldsManager = cluster.FieldManager
}

// Options of install, upgrade and plan.
type Options struct {
	Release   string
	Namespace string
	// Values are the user's values (-f, --set).
	Values map[string]any
	// ReuseValues merges Values over the last release's values (upgrade);
	// ResetValues uses only Values. With neither, an upgrade without values
	// keeps the last release's values, as Helm does.
	ReuseValues, ResetValues bool
	// CRDs to apply first; nil means the chart's crds/.
	CRDs []*unstructured.Unstructured
	// CreateNamespace creates the release namespace on install.
	CreateNamespace bool
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// Wait for the Deployments to be ready, up to Timeout, with progress.
	Wait    bool
	Timeout time.Duration
	// Progress receives progress lines (stderr).
	Progress io.Writer
	// Debug sends the Helm SDK's log to Progress.
	Debug bool
}

func (o *Options) defaults() {
	if o.Release == "" {
		o.Release = chart.DefaultReleaseName
	}
	if o.Namespace == "" {
		o.Namespace = chart.DefaultNamespace
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Values == nil {
		o.Values = map[string]any{}
	}
}

func (o *Options) crds() ([]*unstructured.Unstructured, error) {
	if o.CRDs != nil {
		return o.CRDs, nil
	}
	return cluster.ChartCRDs()
}

// Manager runs the Helm actions against one cluster.
type Manager struct {
	C *cluster.Cluster
}

// Error is a failure with a hint of what to change.
type Error struct {
	Err  error
	Hint string
	// Invalid marks input errors (values, flags, release state), as
	// opposed to operational failures.
	Invalid bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func (m *Manager) helm(namespace string, o Options) (*action.Configuration, error) {
	h := slog.DiscardHandler
	if o.Debug {
		h = slog.NewTextHandler(o.Progress, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(h))
	if err := cfg.Init(m.C.Getter(namespace), namespace, "secret"); err != nil {
		return nil, fmt.Errorf("initialising the Helm SDK: %w", err)
	}
	return cfg, nil
}

// Info is a release, as commands print it.
type Info struct {
	Release      string              `json:"release"`
	Namespace    string              `json:"namespace"`
	Revision     int                 `json:"revision"`
	Status       string              `json:"status"`
	ChartVersion string              `json:"chartVersion"`
	AppVersion   string              `json:"appVersion"`
	CRDs         []cluster.CRDResult `json:"crds,omitempty"`
	Notes        string              `json:"notes,omitempty"`
}

func infoOf(r *releasev1.Release) *Info {
	i := &Info{Release: r.Name, Namespace: r.Namespace, Revision: r.Version}
	if r.Info != nil {
		i.Status, i.Notes = string(r.Info.Status), r.Info.Notes
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		i.ChartVersion, i.AppVersion = r.Chart.Metadata.Version, r.Chart.Metadata.AppVersion
	}
	return i
}

// Current returns the release's last revision that is deployed (or, when
// none is, the last one), or nil when there is no release.
func (m *Manager) Current(namespace, name string) (*releasev1.Release, error) {
	cfg, err := m.helm(namespace, Options{Progress: io.Discard})
	if err != nil {
		return nil, err
	}
	return current(cfg, name)
}

func current(cfg *action.Configuration, name string) (*releasev1.Release, error) {
	hist, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || (err == nil && len(hist) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history of release %s: %w", name, err)
	}
	var rels []*releasev1.Release
	for _, h := range hist {
		if r, ok := h.(*releasev1.Release); ok {
			rels = append(rels, r)
		}
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Version < rels[j].Version })
	for i := len(rels) - 1; i >= 0; i-- {
		if rels[i].Info != nil && rels[i].Info.Status == rcommon.StatusDeployed {
			return rels[i], nil
		}
	}
	if len(rels) == 0 {
		return nil, nil
	}
	last := rels[len(rels)-1]
	if last.Info != nil && last.Info.Status == rcommon.StatusUninstalled {
		return nil, nil
	}
	return last, nil
}

// effectiveValues are the values an upgrade renders with, as Helm decides
// them (see Options.ReuseValues).
func effectiveValues(o Options, cur *releasev1.Release) map[string]any {
	if cur == nil || o.ResetValues {
		return o.Values
	}
	if o.ReuseValues {
		return util.CoalesceTables(deepCopy(o.Values), deepCopy(cur.Config))
	}
	if len(o.Values) == 0 && len(cur.Config) > 0 {
		return deepCopy(cur.Config)
	}
	return o.Values
}

func deepCopy(m map[string]any) map[string]any {
	out := map[string]any{}
	if m == nil {
		return out
	}
	data, err := yaml.Marshal(m)
	if err == nil {
		_ = yaml.Unmarshal(data, &out)
	}
	return out
}

// render renders the chart for the cluster's Kubernetes version.
func (m *Manager) render(ctx context.Context, o Options, vals map[string]any, upgrade bool) (*chart.Rendered, error) {
	kv, err := m.C.KubeVersion(ctx)
	if err != nil {
		return nil, err
	}
	return values.Render(vals, chart.Options{ReleaseName: o.Release, Namespace: o.Namespace, KubeVersion: kv, IsUpgrade: upgrade})
}

// Install applies the CRDs and installs the release. It fails when the
// release exists.
func (m *Manager) Install(ctx context.Context, o Options) (*Info, error) {
	o.defaults()
	cfg, err := m.helm(o.Namespace, o)
	if err != nil {
		return nil, err
	}
	cur, err := current(cfg, o.Release)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, &Error{Invalid: true,
			Err:  fmt.Errorf("release %s already exists in namespace %s (revision %d, %s)", o.Release, o.Namespace, cur.Version, cur.Info.Status),
			Hint: "run `tuna-operator upgrade` to change it, or pick another --release"}
	}
	if _, err := m.render(ctx, o, o.Values, false); err != nil {
		return nil, err
	}
	if !o.CreateNamespace {
		if _, err := m.C.Kube.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil, &Error{Invalid: true, Err: fmt.Errorf("namespace %s does not exist", o.Namespace), Hint: "create it, or pass --create-namespace"}
		}
	}
	crdRes, err := m.applyCRDs(ctx, o)
	if err != nil {
		return nil, err
	}
	cfg, err = m.helm(o.Namespace, o) // fresh discovery after the CRDs
	if err != nil {
		return nil, err
	}
	ch, err := chart.Load()
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = o.Release, o.Namespace
	in.CreateNamespace = o.CreateNamespace
	in.SkipCRDs = true // applied above with server-side apply
	in.ServerSideApply = true
	in.ForceConflicts = o.ForceConflicts
	in.WaitStrategy = kube.HookOnlyStrategy
	in.Timeout = o.Timeout
	fmt.Fprintf(o.Progress, "installing release %s in namespace %s\n", o.Release, o.Namespace)
	reli, err := in.RunWithContext(ctx, ch, o.Values)
	if err != nil {
		return nil, helmError("install", err)
	}
	rel, _ := reli.(*releasev1.Release)
	info := infoOf(rel)
	info.CRDs = crdRes
	if o.Wait {
		if err := m.waitReady(ctx, o, rel.Manifest); err != nil {
			return info, err
		}
	}
	return info, nil
}

// Upgrade applies the CRDs and upgrades the release; with install it
// installs a release that does not exist.
func (m *Manager) Upgrade(ctx context.Context, o Options, install bool) (*Info, error) {
	o.defaults()
	cfg, err := m.helm(o.Namespace, o)
	if err != nil {
		return nil, err
	}
	cur, err := current(cfg, o.Release)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		if install {
			return m.Install(ctx, o)
		}
		return nil, &Error{Invalid: true,
			Err:  fmt.Errorf("release %s not found in namespace %s", o.Release, o.Namespace),
			Hint: "run `tuna-operator install` first (or `upgrade --install`), or give the release's --release and --namespace"}
	}
	vals := effectiveValues(o, cur)
	if _, err := m.render(ctx, o, vals, true); err != nil {
		return nil, err
	}
	crdRes, err := m.applyCRDs(ctx, o)
	if err != nil {
		return nil, err
	}
	cfg, err = m.helm(o.Namespace, o)
	if err != nil {
		return nil, err
	}
	ch, err := chart.Load()
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = o.Namespace
	up.ResetValues = true // vals are already what Helm would compute
	up.ServerSideApply = "auto"
	up.ForceConflicts = o.ForceConflicts
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = o.Timeout
	fmt.Fprintf(o.Progress, "upgrading release %s in namespace %s (revision %d)\n", o.Release, o.Namespace, cur.Version)
	reli, err := up.RunWithContext(ctx, o.Release, ch, vals)
	if err != nil {
		return nil, helmError("upgrade", err)
	}
	rel, _ := reli.(*releasev1.Release)
	info := infoOf(rel)
	info.CRDs = crdRes
	if o.Wait {
		if err := m.waitReady(ctx, o, rel.Manifest); err != nil {
			return info, err
		}
	}
	return info, nil
}

func (m *Manager) applyCRDs(ctx context.Context, o Options) ([]cluster.CRDResult, error) {
	crds, err := o.crds()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "applying %d CRDs (server-side apply, field manager %s)\n", len(crds), cluster.FieldManager)
	return m.C.ApplyCRDs(ctx, crds, o.Progress)
}

func helmError(op string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cannot be imported into the current release"), strings.Contains(msg, "invalid ownership metadata"):
		return &Error{Err: fmt.Errorf("%s: %w", op, err), Invalid: true,
			Hint: "an object of the chart already exists outside this release: delete it, or (for the IngressClass) set ingressClass.enabled=false"}
	case strings.Contains(msg, "conflict"):
		return &Error{Err: fmt.Errorf("%s: %w", op, err), Hint: "another field manager owns these fields: pass --force-conflicts to take them over"}
	case strings.Contains(msg, "another operation"):
		return &Error{Err: fmt.Errorf("%s: %w", op, err), Hint: "another install/upgrade/rollback of this release is in progress; wait for it, or roll it back with helm rollback"}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// waitReady waits until the release's Deployments are rolled out and
// available, printing progress whenever it changes.
func (m *Manager) waitReady(ctx context.Context, o Options, manifest string) error {
	objs, err := cluster.DecodeYAML([]byte(manifest))
	if err != nil {
		return err
	}
	var names []string
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			names = append(names, obj.GetName())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	fmt.Fprintf(o.Progress, "waiting up to %s for %d Deployments to be ready\n", o.Timeout, len(names))
	last := ""
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var lines []string
		ready := 0
		for _, n := range names {
			d, err := m.C.Kube.AppsV1().Deployments(o.Namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				lines = append(lines, fmt.Sprintf("deployment %s: %v", n, err))
				continue
			}
			ok, line := rolledOut(d)
			if ok {
				ready++
			}
			lines = append(lines, line)
		}
		now := strings.Join(lines, "; ")
		if now != last {
			fmt.Fprintf(o.Progress, "%d/%d ready: %s\n", ready, len(names), now)
			last = now
		}
		if ready == len(names) {
			return nil
		}
		select {
		case <-ctx.Done():
			return &Error{
				Err: fmt.Errorf("the release is applied, but its Deployments are not ready after %s: %s", o.Timeout, now),
				Hint: fmt.Sprintf("look at the pods: kubectl -n %s get pods -l app.kubernetes.io/instance=%s, and kubectl -n %s describe deployment; run with a longer --timeout, or without --wait",
					o.Namespace, o.Release, o.Namespace),
			}
		case <-tick.C:
		}
	}
}

func rolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	line := fmt.Sprintf("deployment %s %d/%d available, %d updated", d.Name, s.AvailableReplicas, want, s.UpdatedReplicas)
	ok := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
	if s.ObservedGeneration < d.Generation {
		line += " (not yet seen by the deployment controller)"
	}
	return ok, line
}
