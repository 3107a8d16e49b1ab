package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cmd"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
)

// createLB creates a Service of type LoadBalancer in namespace apps
// (class "" for none), removed when the test ends.
func createLB(t *testing.T, name, class string) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	if _, err := env.CP.Namespace(ctx, "apps"); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, TargetPort: intstr.FromInt32(5432)}}}}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	svc, err := env.kube.CoreV1().Services("apps").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Services("apps").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return svc
}

// Preflight looks at LoadBalancer Services: those of class tuna wait in
// vain when loadBalancer.enabled=false (‼), classless ones without a load
// balancer are pointed at the class (‼), and with loadBalancer.classless a
// classless Service that another load balancer serves is a conflict (×).
func TestPreflightLoadBalancer(t *testing.T) {
	restoreChartCRDs(t)
	ctx := context.Background()
	createLB(t, "ours", "k8s.tuna.am/tuna")
	createLB(t, "pending", "")
	served := createLB(t, "cloud", "")
	served.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	if _, err := env.kube.CoreV1().Services("apps").UpdateStatus(ctx, served, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createLB(t, "metallb", "metallb.io/metallb")

	run := func(want int, set ...string) report.Report {
		t.Helper()
		args := []string{"preflight", "-o", "json"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		r := tuna(t, append(args, valuesArgs(env.Edge.OperatorKey)...)...)
		expectCode(t, r, want)
		return decodeReport(t, r)
	}
	rep := run(cmd.ExitOK)
	if c := check(t, rep, "LoadBalancer Services of class k8s.tuna.am/tuna are published"); c.Result != report.Success || c.Detail != "1 found" {
		t.Errorf("class tuna: %+v", c)
	}
	if c := check(t, rep, "no classless LoadBalancer Service is served twice"); c.Result != report.Warning || !strings.Contains(c.Error, "apps/pending") ||
		strings.Contains(c.Error, "apps/cloud") || !strings.Contains(c.Hint, "loadBalancerClass: k8s.tuna.am/tuna") {
		t.Errorf("classless and pending: %+v", c)
	}

	rep = run(cmd.ExitFailed, "loadBalancer.classless=true")
	if c := check(t, rep, "no classless LoadBalancer Service is served twice"); c.Result != report.Error || !strings.Contains(c.Error, "apps/cloud") ||
		strings.Contains(c.Error, "apps/pending") || strings.Contains(c.Error, "metallb") || !strings.Contains(c.Hint, "loadBalancer.classless=false") {
		t.Errorf("classless conflict: %+v", c)
	}

	rep = run(cmd.ExitOK, "loadBalancer.enabled=false")
	if c := check(t, rep, "LoadBalancer Services of class k8s.tuna.am/tuna are published"); c.Result != report.Warning ||
		!strings.Contains(c.Error, "apps/ours") || !strings.Contains(c.Hint, "loadBalancer.enabled=true") {
		t.Errorf("disabled with Services waiting: %+v", c)
	}
	if rep.Find("no classless LoadBalancer Service is served twice") != nil {
		t.Error("with loadBalancer.enabled=false there is no classless check")
	}
}
