package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// ns is where the Tunnels live.
const ns = "scale"

// world is one size's: a control plane, the edge, the operator's two
// processes, and a cache of the Tunnels that the waits read (so watching
// 10,000 Tunnels costs the apiserver one watch, not a list per look).
type world struct {
	dir, bin string
	// The controller's and the agent's kubeconfigs: each acts as its
	// ServiceAccount of the chart, with the chart's RBAC, so the
	// apiserver's Priority and Fairness classifies its requests as in a
	// cluster (an administrator's would be exempt from it).
	controllerKubeconfig, agentKubeconfig string
	// flowSchema is the chart's FlowSchema for the components' Leases
	// (nil: left out, TUNA_SCALE_FLOWSCHEMA=off).
	flowSchema        *flowcontrolv1.FlowSchema
	cp                *harness.ControlPlane
	apiserver, etcd   int // their PIDs, for CPU time
	edge              *harness.EdgeProcess
	controller, agent *operatorProcess
	tunnels           cache.Cache
	stopCache         context.CancelFunc
	writer            client.Client
}

// operatorProcess is a controller or agent process with its metrics and
// profile addresses.
type operatorProcess struct {
	*harness.Process
	metrics, pprof string
}

func startWorld(ctx context.Context, dir, bin string) (w *world, err error) {
	w = &world{dir: dir, bin: bin, controllerKubeconfig: filepath.Join(dir, "controller.kubeconfig"),
		agentKubeconfig: filepath.Join(dir, "agent.kubeconfig")}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.cp, err = harness.StartControlPlane(); err != nil {
		return w, err
	}
	if w.apiserver, w.etcd, err = controlPlanePIDs(w.cp.Config.Host); err != nil {
		return w, err
	}
	for _, name := range []string{harness.OperatorNamespace, ns} {
		if _, err := w.cp.Namespace(ctx, name); err != nil {
			return w, err
		}
	}
	if _, err := harness.CreateService(ctx, w.cp.Client, ns, "web", harness.ServicePort{Port: 8080}); err != nil {
		return w, err
	}
	ids, err := w.cp.ChartIdentities(ctx)
	if err != nil {
		return w, err
	}
	if err := w.cp.WriteKubeconfigAs(w.controllerKubeconfig, ids.Controller.Impersonate); err != nil {
		return w, err
	}
	if err := w.cp.WriteKubeconfigAs(w.agentKubeconfig, ids.Agent.Impersonate); err != nil {
		return w, err
	}
	if os.Getenv("TUNA_SCALE_FLOWSCHEMA") != "off" {
		if w.flowSchema, err = harness.ChartFlowSchema(); err != nil {
			return w, err
		}
		if err := w.cp.Client.Create(ctx, w.flowSchema); err != nil {
			return w, fmt.Errorf("creating the chart's FlowSchema: %w", err)
		}
	}
	// The edge as it ships: no flag raises its API budget.
	if w.edge, err = harness.StartEdgeProcess(dir); err != nil {
		return w, err
	}
	if err := w.startOperator(); err != nil {
		return w, err
	}
	// A client for the Tunnels that is not itself the bottleneck.
	cfg := rest.CopyConfig(w.cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	if w.writer, err = client.New(cfg, client.Options{Scheme: app.Scheme()}); err != nil {
		return w, err
	}
	// The bench's own view of the Tunnels, polled every 250 ms: without
	// managed fields and read without copies, so that it takes little of
	// the CPU the measured processes share with it.
	w.tunnels, err = cache.New(cfg, cache.Options{Scheme: app.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return w, err
	}
	if _, err := w.tunnels.GetInformer(ctx, &tunav1.Tunnel{}); err != nil {
		return w, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	w.stopCache = cancel
	go func() { _ = w.tunnels.Start(cctx) }()
	if !w.tunnels.WaitForCacheSync(ctx) {
		return w, errors.New("the Tunnel cache did not sync")
	}
	return w, nil
}

// startOperator starts the controller and the agent with their default
// flags, plus metrics and profiles on loopback.
func (w *world) startOperator() error {
	addrs := make([]string, 4)
	for i := range addrs {
		a, err := ports.TakeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	c, err := harness.StartControllerProcess(w.bin, w.controllerKubeconfig, filepath.Join(w.dir, "controller.log"), w.edge, w.edge.OperatorKey,
		"--metrics-bind-address="+addrs[0], "--pprof-bind-address="+addrs[1])
	if err != nil {
		return err
	}
	w.controller = &operatorProcess{Process: c, metrics: addrs[0], pprof: addrs[1]}
	a, err := harness.StartAgentProcess(w.bin, w.agentKubeconfig, w.dir,
		"--metrics-bind-address="+addrs[2], "--pprof-bind-address="+addrs[3], "--replica=agent-0")
	if err != nil {
		return err
	}
	w.agent = &operatorProcess{Process: a, metrics: addrs[2], pprof: addrs[3]}
	return nil
}

// stopOperator stops both components as the kubelet does (SIGTERM, with
// the agent's drain) and says how long that took.
func (w *world) stopOperator() (time.Duration, error) {
	start := time.Now()
	err := errors.Join(w.controller.Stop(), w.agent.Stop())
	return time.Since(start), err
}

func (w *world) stop() {
	if w.controller != nil {
		_ = w.controller.Kill()
	}
	if w.agent != nil {
		_ = w.agent.Kill()
	}
	if w.stopCache != nil {
		w.stopCache()
	}
	if w.edge != nil {
		_ = w.edge.Stop()
	}
	if w.cp != nil {
		_ = w.cp.Stop()
	}
}

// tunnelStates counts the Tunnels that are Ready, and those Ready with a
// session other than the one in before (nil: any).
func (w *world) tunnelStates(ctx context.Context, before map[string]string) (ready, renewed int, err error) {
	var list tunav1.TunnelList
	if err := w.tunnels.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for _, t := range list.Items {
		c := status.Find(t.Status.Conditions, tunav1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		ready++
		if before != nil && t.Status.SessionID != "" && t.Status.SessionID != before[t.Name] {
			renewed++
		}
	}
	return ready, renewed, nil
}

// sessions maps each Tunnel to its session now.
func (w *world) sessions(ctx context.Context) (map[string]string, error) {
	var list tunav1.TunnelList
	if err := w.tunnels.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Items))
	for _, t := range list.Items {
		out[t.Name] = t.Status.SessionID
	}
	return out, nil
}

// controllerConfirmed reports whether the Tunnel controller has
// reconciled n Tunnels since it started and has nothing left queued:
// every Tunnel's key was checked against the view of the edge.
func (w *world) controllerConfirmed(n int) (bool, error) {
	families, err := stats.Scrape(nil, "http://"+w.controller.metrics+"/metrics")
	if err != nil {
		return false, err
	}
	reconciled, depth := 0.0, 0.0
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		if label(m.GetLabel(), "controller") == "tunnel-key" {
			reconciled += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["workqueue_depth"].GetMetric() {
		if label(m.GetLabel(), "name") == "tunnel-key" {
			depth += m.GetGauge().GetValue()
		}
	}
	return reconciled >= float64(n) && depth == 0, nil
}

func label[L interface {
	GetName() string
	GetValue() string
}](labels []L, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// createTunnels applies n Tunnels at once (32 writers).
func (w *world) createTunnels(ctx context.Context, n int) error {
	next := make(chan int)
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			for i := range next {
				name := "t" + strconv.Itoa(i)
				t := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "s-" + name,
						Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}}}
				if err := w.writer.Create(ctx, t); err != nil {
					errs <- fmt.Errorf("creating Tunnel %s: %w", name, err)
					for range next {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var all []error
	for range 32 {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
