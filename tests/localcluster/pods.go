package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// Pod is one replica of a rendered Deployment, run as a process: what a
// kubelet would do with its pod, translated to this machine.
type Pod struct {
	// Name is <deployment>-<replica>, the pod name the process is told.
	Name string
	// Component is the Deployment's app.kubernetes.io/component.
	Component string
	// Log is the file the process writes to.
	Log string
	// Ports maps the container's ports (by name) to the loopback
	// addresses the process listens on instead.
	Ports map[string]string

	proc  *harness.Process
	ready string // the readiness probe's URL
}

// runDeployments starts every replica of every rendered Deployment and
// waits until each passes its readiness probe.
func (c *Cluster) runDeployments(ctx context.Context) error {
	for _, m := range c.Rendered.OfKind("Deployment") {
		var d appsv1.Deployment
		if err := m.Into(&d); err != nil {
			return fmt.Errorf("decoding Deployment %s: %w", m.Name(), err)
		}
		component := d.Labels[chart.ComponentLabel]
		rbac, err := c.Rendered.RBAC(component)
		if err != nil {
			return err
		}
		// The pods' identity is their ServiceAccount's: the kubeconfig
		// impersonates it, so they have exactly the chart's RBAC.
		kubeconfig := filepath.Join(c.Dir, "kubeconfig-"+rbac.ServiceAccount.Name)
		if err := c.CP.WriteKubeconfigAs(kubeconfig, rest.ImpersonationConfig{UserName: rbac.Username(), Groups: rbac.Groups()}); err != nil {
			return err
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		for i := range replicas {
			p, err := c.startPod(ctx, &d, fmt.Sprintf("%s-%d", d.Name, i), component, kubeconfig)
			if err != nil {
				return err
			}
			c.Pods = append(c.Pods, p)
		}
	}
	for _, p := range c.Pods {
		if err := p.waitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startPod runs one replica: the container's args with its ports moved to
// free loopback ports and its mount paths to files under the state dir,
// its environment (fieldRefs, Secrets and ConfigMaps resolved), and the
// ServiceAccount's kubeconfig.
func (c *Cluster) startPod(ctx context.Context, d *appsv1.Deployment, name, component, kubeconfig string) (*Pod, error) {
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		return nil, fmt.Errorf("the Deployment %s: a local pod runs exactly one container", d.Name)
	}
	ctr := spec.Containers[0]
	if len(ctr.Command) > 0 {
		return nil, fmt.Errorf("the Deployment %s: the image's entrypoint is the operator's binary; a command is not expected", d.Name)
	}
	p := &Pod{Name: name, Component: component, Log: filepath.Join(c.Dir, "logs", name+".log"), Ports: map[string]string{}}
	var replace []string
	byNumber := map[int32]string{}
	for _, port := range ctr.Ports {
		addr, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		p.Ports[port.Name] = addr
		byNumber[port.ContainerPort] = addr
		replace = append(replace, "=:"+strconv.Itoa(int(port.ContainerPort)), "="+addr)
	}
	for _, vm := range ctr.VolumeMounts {
		dir := filepath.Join(c.Dir, "pods", name, vm.Name)
		if err := c.materialize(ctx, d.Namespace, spec.Volumes, vm.Name, dir); err != nil {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
		replace = append(replace, vm.MountPath, dir)
	}
	args := make([]string, len(ctr.Args))
	r := strings.NewReplacer(replace...)
	for i, a := range ctr.Args {
		args[i] = r.Replace(a)
	}
	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range ctr.Env {
		v, err := c.envValue(ctx, d.Namespace, name, e)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	if probe := ctr.ReadinessProbe; probe != nil && probe.HTTPGet != nil {
		addr := p.Ports[probe.HTTPGet.Port.StrVal]
		if probe.HTTPGet.Port.StrVal == "" {
			addr = byNumber[probe.HTTPGet.Port.IntVal]
		}
		p.ready = "http://" + addr + probe.HTTPGet.Path
	}
	proc, err := harness.StartProcess(p.Log, env, c.o.Operator, args...)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	c.logs[name] = p.Log
	return p, nil
}

// materialize writes the volume named name into dir, as the kubelet
// mounts it: a Secret's or ConfigMap's items (or all keys) with their
// modes, or an empty folder.
func (c *Cluster) materialize(ctx context.Context, namespace string, volumes []corev1.Volume, name, dir string) error {
	var vol *corev1.Volume
	for i := range volumes {
		if volumes[i].Name == name {
			vol = &volumes[i]
		}
	}
	if vol == nil {
		return fmt.Errorf("volume %s is mounted but not declared", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var (
		data  map[string][]byte
		items []corev1.KeyToPath
		mode  *int32
		err   error
	)
	switch {
	case vol.Secret != nil:
		data, err = c.secretOrConfigMap(ctx, "Secret", namespace, vol.Secret.SecretName)
		items, mode = vol.Secret.Items, vol.Secret.DefaultMode
	case vol.ConfigMap != nil:
		data, err = c.secretOrConfigMap(ctx, "ConfigMap", namespace, vol.ConfigMap.Name)
		items, mode = vol.ConfigMap.Items, vol.ConfigMap.DefaultMode
	case vol.EmptyDir != nil:
		return nil
	default:
		return fmt.Errorf("volume %s: a local pod has Secret, ConfigMap and emptyDir volumes only", name)
	}
	if err != nil {
		return err
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode)
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("volume %s: no key %s", name, it.Key)
		}
		m := perm
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		// The owner must read it: the process runs as this user, not in
		// the pod's fsGroup.
		if err := os.WriteFile(filepath.Join(dir, it.Path), v, m|0o400); err != nil {
			return err
		}
	}
	return nil
}

// envValue resolves one environment variable as the kubelet does.
func (c *Cluster) envValue(ctx context.Context, namespace, pod string, e corev1.EnvVar) (string, error) {
	switch from := e.ValueFrom; {
	case from == nil:
		return e.Value, nil
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.namespace":
			return namespace, nil
		case "metadata.name":
			return pod, nil
		}
		return "", fmt.Errorf("env %s: field %s is not known here", e.Name, from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		data, err := c.secretOrConfigMap(ctx, "Secret", namespace, from.SecretKeyRef.Name)
		return string(data[from.SecretKeyRef.Key]), err
	case from.ConfigMapKeyRef != nil:
		data, err := c.secretOrConfigMap(ctx, "ConfigMap", namespace, from.ConfigMapKeyRef.Name)
		return string(data[from.ConfigMapKeyRef.Key]), err
	}
	return "", fmt.Errorf("env %s: a local pod resolves values, fieldRefs, Secrets and ConfigMaps only", e.Name)
}

// waitReady waits until the pod's readiness probe answers 200.
func (p *Pod) waitReady(ctx context.Context) error {
	if p.ready == "" {
		return nil
	}
	client := &http.Client{Timeout: 2 * time.Second}
	return waitFor(ctx, 2*time.Minute, "pod "+p.Name+" ready (its log: "+p.Log+")", func() (bool, error) {
		if p.proc.Exited() {
			return false, permanentError{fmt.Errorf("it exited")}
		}
		resp, err := client.Get(p.ready)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readiness: %s", resp.Status)
	})
}

// Stop ends the pod's process as the kubelet does (SIGTERM, then waits).
func (p *Pod) Stop() error { return p.proc.Stop() }

// Running reports whether the pod's process runs.
func (p *Pod) Running() bool { return !p.proc.Exited() }
