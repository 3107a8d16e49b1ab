package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/release"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

const (
	ns          = "tuna-system" // the release namespace (the defaults)
	releaseName = "tuna-operator"
	fullname    = "tuna-operator-tuna-k8s-operator"
)

type planJSON struct {
	release.Plan
	Changes bool `json:"changes"`
}

func find(cs []cluster.Change, kind, name string) *cluster.Change {
	for i := range cs {
		if cs[i].Kind == kind && cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// TestLifecycle: plan, install, plan, upgrade with a changed CRD, plan,
// then uninstall in the documented order while Domains with the operator's
// finalizer exist, and finally delete the CRDs.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { restoreChartCRDs(t) })
	vals := valuesArgs(env.Edge.OperatorKey)
	with := func(args ...string) []string { return append(args, vals...) }

	// A plan without the release is an install that creates everything.
	r := tuna(t, with("plan", "-o", "json")...)
	expectCode(t, r, cmd.ExitChanges)
	p := decode[planJSON](t, r)
	if p.Operation != "install" || !p.Changes || len(p.Resources) < 10 {
		t.Fatalf("plan before install: %+v", p)
	}
	for _, c := range p.Resources {
		if c.Action != cluster.ActionCreate || c.Error != "" {
			t.Errorf("before install %s: %s %s", c.Ref(), c.Action, c.Error)
		}
	}
	for _, c := range p.CRDs { // the control plane starts with the chart's CRDs
		if c.Action != cluster.ActionUnchanged {
			t.Errorf("CRD %s: %s %v, want unchanged", c.Name, c.Action, c.Summary)
		}
	}

	// Install: CRDs first with server-side apply as field manager helm.
	r = tuna(t, with("install")...)
	expectCode(t, r, cmd.ExitOK)
	if !strings.Contains(r.stdout, "Release tuna-operator installed in namespace tuna-system: revision 1, deployed") {
		t.Fatalf("install output: %s", r)
	}
	if i, j := strings.Index(r.stderr, fmt.Sprintf("applying %d CRDs", len(cluster.CRDNames()))), strings.Index(r.stderr, "installing release"); i < 0 || j < i {
		t.Fatalf("the CRDs must be applied before the release: %s", r)
	}
	for _, name := range cluster.CRDNames() {
		assertAppliedByHelm(t, cluster.CRDResource, "", name)
	}
	for _, name := range []string{fullname + "-controller", fullname + "-agent"} {
		if _, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("Deployment %s: %v", name, err)
		}
	}
	if _, err := env.kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.tuna-operator.v1", metav1.GetOptions{}); err != nil {
		t.Fatalf("Helm's release record: %v", err)
	}
	assertAppliedByHelm(t, deploymentsGVR, ns, fullname+"-controller")

	// A second install is refused with what to do instead.
	r = tuna(t, with("install")...)
	expectCode(t, r, cmd.ExitInvalid)
	if !strings.Contains(r.stderr, "already exists") || !strings.Contains(r.stderr, "tuna-operator upgrade") {
		t.Fatalf("second install: %s", r)
	}

	// Nothing to change right after the install: with the same values,
	// and without values (an upgrade keeps them, as Helm's does).
	r = tuna(t, with("plan")...)
	expectCode(t, r, cmd.ExitOK)
	if !strings.Contains(r.stdout, "No changes") {
		t.Fatalf("plan after install: %s", r)
	}
	expectCode(t, tuna(t, "plan"), cmd.ExitOK)

	// A newer chart: a changed CRD, more controller replicas, no dashboard.
	newer := cmd.Env{CRDs: modifiedCRDs(t)}
	change := []string{"--reuse-values", "--set", "controller.replicas=3", "--set", "metrics.dashboard.enabled=false"}
	r = tunaEnv(t, newer, append([]string{"plan", "-o", "json"}, change...)...)
	expectCode(t, r, cmd.ExitChanges)
	p = decode[planJSON](t, r)
	if p.Operation != "upgrade" || p.Revision != 1 {
		t.Fatalf("plan: %+v", p)
	}
	crd := find(p.CRDs, "CustomResourceDefinition", cluster.Tunnels.CRDName())
	if crd == nil || crd.Action != cluster.ActionUpdate || !slices.Contains(crd.Summary, "schema of version v1alpha1 changed") {
		t.Fatalf("CRD change: %+v", crd)
	}
	if c := find(p.CRDs, "CustomResourceDefinition", cluster.Domains.CRDName()); c == nil || c.Action != cluster.ActionUnchanged {
		t.Fatalf("Domain CRD: %+v", c)
	}
	if c := find(p.Resources, "Deployment", fullname+"-controller"); c == nil || c.Action != cluster.ActionUpdate || !slices.Contains(c.Fields, "spec.replicas") {
		t.Fatalf("controller Deployment: %+v", c)
	}
	if c := find(p.Resources, "Deployment", fullname+"-agent"); c == nil || c.Action != cluster.ActionUnchanged {
		t.Fatalf("agent Deployment: %+v", c)
	}
	if c := find(p.Resources, "ConfigMap", fullname+"-dashboard"); c == nil || c.Action != cluster.ActionDelete {
		t.Fatalf("dashboard ConfigMap: %+v", c)
	}
	r = tunaEnv(t, newer, append([]string{"plan"}, change...)...)
	expectCode(t, r, cmd.ExitChanges)
	for _, want := range []string{
		"~ update CustomResourceDefinition tunnels.k8s.tuna.am: schema of version v1alpha1 changed",
		"~ update Deployment tuna-system/" + fullname + "-controller",
		"- delete ConfigMap tuna-system/" + fullname + "-dashboard",
		"0 to create, 2 to update, 1 to delete",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan text lacks %q: %s", want, r)
		}
	}

	// The upgrade applies the changed CRD, then upgrades the release.
	if tunnelSpecHasTestField(t) {
		t.Fatal("the CRD has the new field before the upgrade")
	}
	r = tunaEnv(t, newer, append([]string{"upgrade", "-o", "json"}, change...)...)
	expectCode(t, r, cmd.ExitOK)
	info := decode[release.Info](t, r)
	if info.Revision != 2 || info.Status != "deployed" {
		t.Fatalf("upgrade: %+v", info)
	}
	// Only the Tunnel CRD changed; the others are applied and unchanged.
	if c := info.CRDs; len(c) != len(cluster.CRDNames()) {
		t.Fatalf("CRD results: %+v", c)
	}
	for _, c := range info.CRDs {
		want := "unchanged"
		if c.Name == cluster.Tunnels.CRDName() {
			want = "configured"
		}
		if c.Result != want {
			t.Errorf("CRD %s: %s, want %s", c.Name, c.Result, want)
		}
	}
	if !tunnelSpecHasTestField(t) {
		t.Fatal("the upgrade did not update the Tunnel CRD")
	}
	assertAppliedByHelm(t, cluster.CRDResource, "", cluster.Tunnels.CRDName())
	d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, fullname+"-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("controller Deployment after upgrade: %v", err)
	}
	if *d.Spec.Replicas != 3 {
		t.Fatalf("controller Deployment after upgrade: replicas %d, want 3 as the upgrade set", *d.Spec.Replicas)
	}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, fullname+"-dashboard", metav1.GetOptions{}); !gone(err) {
		t.Fatalf("the dashboard ConfigMap survived the upgrade: %v", err)
	}
	// Now the plan is empty; with the older chart the CRD would change back.
	expectCode(t, tunaEnv(t, newer, "plan", "--reuse-values"), cmd.ExitOK)
	r = tuna(t, "plan", "--reuse-values", "-o", "json")
	expectCode(t, r, cmd.ExitChanges)
	if c := find(decode[planJSON](t, r).CRDs, "CustomResourceDefinition", cluster.Tunnels.CRDName()); c == nil || c.Action != cluster.ActionUpdate {
		t.Fatalf("plan with the older CRD: %+v", c)
	}

	// The operator as installed: the controller runs with the RBAC of the
	// controller ServiceAccount that the install created.
	ctrlCfg := rest.CopyConfig(env.CP.Config)
	ctrlCfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + fullname + "-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	controller := harness.StartController(ctrlCfg, env.Edge)
	defer func() {
		if err := controller.Stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	if _, err := env.CP.Namespace(ctx, "apps"); err != nil {
		t.Fatal(err)
	}

	// A Domain whose finalizers do not finish holds the uninstall: after
	// the timeout the release is still there, and the error says why.
	createDomain(t, "held", "tests.tuna.am/hold")
	waitDomainReady(t, "held")
	r = tuna(t, "uninstall", "--timeout", "3s")
	expectCode(t, r, cmd.ExitFailed)
	for _, want := range []string{"Domain apps/held (finalizers: tests.tuna.am/hold", "the release was not removed", "Hint: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stuck uninstall lacks %q: %s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "waiting for 1 resource to finish their finalizers") {
		t.Errorf("no progress while waiting: %s", r)
	}
	if _, err := env.kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.tuna-operator.v2", metav1.GetOptions{}); err != nil {
		t.Fatalf("the release must stay while resources wait: %v", err)
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := env.dyn.Resource(cluster.Domains.GVR()).Namespace("apps").Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Domain held gone", func(ctx context.Context) (bool, error) {
		_, err := env.dyn.Resource(cluster.Domains.GVR()).Namespace("apps").Get(ctx, "held", metav1.GetOptions{})
		return gone(err), nil
	})

	// A live Domain, reserved on the edge by the operator.
	createDomain(t, "web")
	waitDomainReady(t, "web")
	r = tuna(t, "status", "-o", "json")
	expectCode(t, r, cmd.ExitOK)
	st := decode[struct{ Items []cluster.Status }](t, r)
	if len(st.Items) != 1 || st.Items[0].Kind != "Domain" || st.Items[0].Address != "web."+harness.BaseDomain || st.Items[0].Ready != "True" {
		t.Fatalf("status: %+v", st)
	}
	r = tuna(t, "status")
	expectCode(t, r, cmd.ExitOK)
	if !strings.Contains(r.stdout, "KIND") || !strings.Contains(r.stdout, "web."+harness.BaseDomain) {
		t.Fatalf("status table: %s", r)
	}
	r = tuna(t, "status", "-n", "elsewhere")
	if r.code != 0 || !strings.Contains(r.stdout, "No Tunnels, Domains, TCPEndpoints, SecretSyncs, AccessPolicies, LoadBalancer Services of class tuna, Gateways or routes in namespace elsewhere") {
		t.Fatalf("status -n: %s", r)
	}

	// A LoadBalancer Service of class tuna: status lists it with its
	// address (its port is reserved; no agent runs here, so its Tunnel
	// never connects), and the uninstall refuses to start while the
	// operator publishes it, since deleting its Tunnels would only see
	// them made again.
	lb := createLB(t, "db", "k8s.tuna.am/tuna")
	var lbRow cluster.Status
	eventually(t, "the LoadBalancer Service in status", func(ctx context.Context) (bool, error) {
		r := tuna(t, "status", "-n", "apps", "-o", "json")
		for _, it := range decode[struct{ Items []cluster.Status }](t, r).Items {
			if it.Kind == cluster.KindLoadBalancer && it.Name == "db" {
				lbRow = it
				return it.Address == "127.0.0.1 (5432)", nil
			}
		}
		return false, nil
	})
	if lbRow.Ready != "False" || lbRow.Reason == "" || !strings.Contains(lbRow.Message, "port 5432") {
		t.Errorf("status row of the LoadBalancer Service: %+v", lbRow)
	}
	r = tuna(t, "uninstall", "--timeout", "1m")
	expectCode(t, r, cmd.ExitFailed)
	for _, want := range []string{"publishes LoadBalancer Services apps/db", "the release was not removed", "loadBalancerClass"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("uninstall with a published LoadBalancer Service lacks %q: %s", want, r)
		}
	}
	if err := env.kube.CoreV1().Services("apps").Delete(ctx, lb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Service db gone through its finalizer", func(ctx context.Context) (bool, error) {
		_, err := env.kube.CoreV1().Services("apps").Get(ctx, lb.Name, metav1.GetOptions{})
		return gone(err), nil
	})
	if !edgeHasDomain(t, "web."+harness.BaseDomain) {
		t.Fatal("the edge does not have the Domain")
	}

	// Uninstall in order: the Domain (its finalizer run by the operator)
	// is gone before Helm deletes the release; the CRDs stay.
	domainDeleted := watchDeleted(t, env.dyn.Resource(cluster.Domains.GVR()).Namespace(""), metav1.ListOptions{})
	releaseDeleted := watchDeleted(t, env.dyn.Resource(secretsGVR).Namespace(ns), metav1.ListOptions{LabelSelector: "owner=helm,name=" + releaseName})
	r = tuna(t, "uninstall", "--timeout", "1m")
	expectCode(t, r, cmd.ExitOK)
	if !strings.Contains(r.stdout, "Release tuna-operator uninstalled") || !strings.Contains(r.stdout, "CRDs kept") {
		t.Fatalf("uninstall: %s", r)
	}
	domainRV, releaseRV := <-domainDeleted, <-releaseDeleted
	if domainRV <= 0 || releaseRV <= 0 || domainRV >= releaseRV {
		t.Fatalf("the Domain was deleted (resourceVersion %d) after the release (%d)", domainRV, releaseRV)
	}
	if edgeHasDomain(t, "web."+harness.BaseDomain) {
		t.Fatal("the operator's finalizer did not release the domain on the edge")
	}
	for _, name := range cluster.CRDNames() {
		if _, err := env.dyn.Resource(cluster.CRDResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("CRD %s after uninstall without --delete-crds: %v", name, err)
		}
	}
	if _, err := env.kube.AppsV1().Deployments(ns).Get(ctx, fullname+"-controller", metav1.GetOptions{}); !gone(err) {
		t.Fatalf("the controller Deployment survived: %v", err)
	}

	// The release is gone: uninstall says so, unless told to go on.
	r = tuna(t, "uninstall")
	expectCode(t, r, cmd.ExitInvalid)
	if !strings.Contains(r.stderr, "release tuna-operator not found in namespace tuna-system") {
		t.Fatalf("uninstall of a missing release: %s", r)
	}
	r = tuna(t, "uninstall", "--ignore-not-found", "--delete-crds", "-o", "json")
	expectCode(t, r, cmd.ExitOK)
	if res := decode[release.UninstallResult](t, r); !res.CRDsDeleted || res.ReleaseRemoved {
		t.Fatalf("uninstall --delete-crds: %+v", res)
	}
	for _, name := range cluster.CRDNames() {
		if _, err := env.dyn.Resource(cluster.CRDResource).Get(ctx, name, metav1.GetOptions{}); !gone(err) {
			t.Fatalf("CRD %s survived --delete-crds: %v", name, err)
		}
	}
	r = tuna(t, "status")
	expectCode(t, r, cmd.ExitFailed)
	if !strings.Contains(r.stderr, "not installed") {
		t.Fatalf("status without CRDs: %s", r)
	}

	// Preflight on the bare cluster: missing CRDs only warn (install
	// applies them).
	r = tuna(t, with("preflight", "-o", "json")...)
	expectCode(t, r, cmd.ExitOK)
	rep := decodeReport(t, r)
	if c := rep.Find("CRD tunnels.k8s.tuna.am is installed and current"); c == nil || c.Result != "warning" {
		t.Fatalf("preflight without CRDs: %+v\n%s", c, r)
	}
}

func createDomain(t *testing.T, name string, finalizers ...string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.tuna.am/v1alpha1", "kind": "Domain",
		"metadata": map[string]any{"name": name, "namespace": "apps"},
		"spec":     map[string]any{"subdomain": name},
	}}
	if len(finalizers) > 0 {
		u.SetFinalizers(finalizers)
	}
	if _, err := env.dyn.Resource(cluster.Domains.GVR()).Namespace("apps").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitDomainReady(t *testing.T, name string) {
	t.Helper()
	eventually(t, "Domain "+name+" Ready", func(ctx context.Context) (bool, error) {
		u, err := env.dyn.Resource(cluster.Domains.GVR()).Namespace("apps").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return slices.Contains(u.GetFinalizers(), "k8s.tuna.am/reservation"), nil
			}
		}
		return false, nil
	})
}

func edgeHasDomain(t *testing.T, fqdn string) bool {
	t.Helper()
	ds, err := env.Edge.Client(env.Edge.AdminKey).ListDomains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Name == fqdn {
			return true
		}
	}
	return false
}

// assertAppliedByHelm checks that field manager "helm" applied the object
// (server-side apply).
func assertAppliedByHelm(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) {
	t.Helper()
	u, err := env.dyn.Resource(gvr).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range u.GetManagedFields() {
		if m.Manager == cluster.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return
		}
	}
	t.Fatalf("%s %s is not applied by field manager helm: %+v", gvr.Resource, name, u.GetManagedFields())
}

var (
	secretsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// watchDeleted returns the resourceVersion of the first DELETED event of
// the watched objects. The apiserver's resourceVersions come from one etcd
// revision counter, so they order events across kinds.
func watchDeleted(t *testing.T, ri interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}, opts metav1.ListOptions) <-chan int64 {
	t.Helper()
	w, err := ri.Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan int64, 1)
	go func() {
		defer w.Stop()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					ch <- -1
					return
				}
				if ev.Type != watch.Deleted {
					continue
				}
				u, _ := ev.Object.(*unstructured.Unstructured)
				rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				ch <- rv
				return
			case <-timeout:
				ch <- -1
				return
			}
		}
	}()
	return ch
}
