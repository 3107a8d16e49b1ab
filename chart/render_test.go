package chart

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
)

// The three sources of the operator's API key (R26). A Secret (the chart's
// or existingSecret) is mounted as a file the controller watches, so a new
// key needs no restart; extraEnv's TUNA_API_KEY is read once.
func TestCredentialsModes(t *testing.T) {
	const vaultRef = "vault:secret/data/tuna#api-key"
	tests := []struct {
		name string
		sets []string
		// secret is the Secret mounted as the key file; "" for extraEnv.
		secret string
		check  func(t *testing.T, r *Rendered, ctrl *corev1.Container)
	}{{
		name:   "apiKey makes the Secret",
		sets:   []string{"credentials.apiKey=tuna_k1"},
		secret: testFullname + "-api-key",
		check: func(t *testing.T, r *Rendered, _ *corev1.Container) {
			m := r.Find("Secret", testFullname+"-api-key")
			if m == nil {
				t.Fatal("no chart Secret")
			}
			var s corev1.Secret
			if err := m.Into(&s); err != nil {
				t.Fatal(err)
			}
			got, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m.Object.Object["data"].(map[string]any)["api-key"]))
			if string(got) != "tuna_k1" || s.Namespace != DefaultNamespace {
				t.Errorf("Secret %s/%s api-key = %q, want tuna_k1 in %s", s.Namespace, s.Name, got, DefaultNamespace)
			}
			// A new key changes the Secret only: kubelet updates the file
			// and the controller re-reads it, so the pod template (and
			// thus the pod) stays the same.
			r2 := render(t, vals(t, "edge.apiURL="+testEdgeURL, "credentials.apiKey=tuna_k2"))
			a, b := deployment(t, r, "controller").Spec.Template, deployment(t, r2, "controller").Spec.Template
			if !equality(a, b) {
				t.Errorf("the controller's pod template changed with the key: a changed key would restart it")
			}
		},
	}, {
		name:   "existingSecret",
		sets:   []string{"credentials.existingSecret=my-tuna-key"},
		secret: "my-tuna-key",
		check: func(t *testing.T, r *Rendered, _ *corev1.Container) {
			if ss := r.OfKind("Secret"); len(ss) != 0 {
				t.Errorf("chart made Secrets %v with existingSecret", ss[0].Name())
			}
		},
	}, {
		name: "extraEnv from a secret injector",
		sets: []string{"extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=" + vaultRef},
		check: func(t *testing.T, r *Rendered, ctrl *corev1.Container) {
			if ss := r.OfKind("Secret"); len(ss) != 0 {
				t.Errorf("chart made Secret %s with extraEnv", ss[0].Name())
			}
			keys := envNamed(ctrl, "TUNA_API_KEY")
			if len(keys) != 1 || keys[0].Value != vaultRef || keys[0].ValueFrom != nil {
				t.Errorf("TUNA_API_KEY = %+v, want value %s", keys, vaultRef)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, vals(t, append([]string{"edge.apiURL=" + testEdgeURL}, tt.sets...)...))
			d := deployment(t, r, "controller")
			ctrl := container(t, d, "controller")
			if _, ok := d.Spec.Template.Annotations["checksum/api-key"]; ok {
				t.Error("checksum/api-key annotation: a new key would restart the controller for nothing")
			}
			vol := volumeNamed(d, "api-key")
			if tt.secret == "" {
				if vol != nil || hasArgPrefix(ctrl, "--api-key-file") {
					t.Errorf("extraEnv mounts a key file: volume %+v, args %v", vol, ctrl.Args)
				}
			} else {
				checkKeyFile(t, d, ctrl, tt.secret)
				if n := len(envNamed(ctrl, "TUNA_API_KEY")); n != 0 {
					t.Errorf("the key is mounted and in TUNA_API_KEY too (%d variables)", n)
				}
			}
			tt.check(t, r, ctrl)
			// The agent needs no API key: its env is POD_NAMESPACE and
			// POD_NAME only, and it mounts nothing.
			ad := deployment(t, r, "agent")
			agent := container(t, ad, "agent")
			if got := envNames(agent); !slices.Equal(got, []string{"POD_NAMESPACE", "POD_NAME"}) {
				t.Errorf("agent env = %v, want [POD_NAMESPACE POD_NAME]", got)
			}
			if len(ad.Spec.Template.Spec.Volumes) != 0 || hasArgPrefix(agent, "--api-key-file") {
				t.Errorf("the agent gets a key file: %+v %v", ad.Spec.Template.Spec.Volumes, agent.Args)
			}
			for _, c := range []*corev1.Container{ctrl, agent} {
				ns := envNamed(c, "POD_NAMESPACE")
				if len(ns) != 1 || ns[0].ValueFrom == nil || ns[0].ValueFrom.FieldRef == nil ||
					ns[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
					t.Errorf("%s: POD_NAMESPACE = %+v, want the Downward API metadata.namespace", c.Name, ns)
				}
			}
		})
	}
}

// checkKeyFile asserts the controller mounts secret's api-key as a file it
// may read, in a directory kubelet keeps current, and is told where it is.
func checkKeyFile(t *testing.T, d *appsv1.Deployment, ctrl *corev1.Container, secret string) {
	t.Helper()
	vol := volumeNamed(d, "api-key")
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != secret {
		t.Fatalf("api-key volume = %+v, want Secret %s", vol, secret)
	}
	if len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != "api-key" || vol.Secret.Items[0].Path != "api-key" {
		t.Errorf("api-key volume items = %+v, want only api-key", vol.Secret.Items)
	}
	if m := vol.Secret.DefaultMode; m == nil || *m != 0o440 {
		t.Errorf("api-key volume mode = %v, want 0440", m)
	}
	if psc := d.Spec.Template.Spec.SecurityContext; psc == nil || psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("pod securityContext %+v: without fsGroup 65532 the user cannot read a 0440 file", psc)
	}
	var mount *corev1.VolumeMount
	for i := range ctrl.VolumeMounts {
		if ctrl.VolumeMounts[i].Name == "api-key" {
			mount = &ctrl.VolumeMounts[i]
		}
	}
	// A subPath mount would never see the Secret's updates.
	if mount == nil || mount.MountPath != "/var/run/tuna/api-key" || !mount.ReadOnly || mount.SubPath != "" {
		t.Errorf("api-key mount = %+v, want read-only /var/run/tuna/api-key without subPath", mount)
	}
	if !hasArg(ctrl, "--api-key-file=/var/run/tuna/api-key/api-key") {
		t.Errorf("controller args = %v, want --api-key-file", ctrl.Args)
	}
}

// Exactly one credentials source, and extraEnv may not repeat what the
// chart sets: each bad mix fails with a message naming the values.
func TestCredentialsErrors(t *testing.T) {
	const choose = "set exactly one of credentials.apiKey"
	tests := []struct {
		name string
		sets []string
		want []string
	}{
		{"none", nil, []string{"API key is not set", "credentials.apiKey", "credentials.existingSecret", "extraEnv with TUNA_API_KEY"}},
		{"apiKey and existingSecret", []string{"credentials.apiKey=k", "credentials.existingSecret=s"},
			[]string{"2 sources (credentials.apiKey, credentials.existingSecret)", choose}},
		{"apiKey and extraEnv", []string{"credentials.apiKey=k", "extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=v"},
			[]string{"2 sources (credentials.apiKey, extraEnv (TUNA_API_KEY))", choose}},
		{"existingSecret and extraEnv", []string{"credentials.existingSecret=s", "extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=v"},
			[]string{"2 sources (credentials.existingSecret, extraEnv (TUNA_API_KEY))", choose}},
		{"all three", []string{"credentials.apiKey=k", "credentials.existingSecret=s", "extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=v"},
			[]string{"3 sources", choose}},
		{"extraEnv sets POD_NAMESPACE", []string{"credentials.apiKey=k", "extraEnv[0].name=POD_NAMESPACE", "extraEnv[0].value=x"},
			[]string{"extraEnv must not set POD_NAMESPACE"}},
		{"extraEnv repeats TUNA_API_KEY", []string{"extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=a", "extraEnv[1].name=TUNA_API_KEY", "extraEnv[1].value=b"},
			[]string{"extraEnv sets TUNA_API_KEY twice"}},
		{"no edge URL", []string{"credentials.apiKey=k"}, []string{"edge.apiURL is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sets := tt.sets
			if tt.name != "no edge URL" {
				sets = append([]string{"edge.apiURL=" + testEdgeURL}, sets...)
			}
			renderFails(t, vals(t, sets...), tt.want...)
		})
	}
}

// extraEnv lands, in order, in the controller's env after the chart's own
// variables; the agent does not get it.
func TestExtraEnvInjection(t *testing.T) {
	values := vals(t, "edge.apiURL="+testEdgeURL)
	values["extraEnv"] = []any{
		map[string]any{"name": "TUNA_API_KEY", "value": "vault:secret/data/tuna#api-key"},
		map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
		map[string]any{"name": "GOMEMLIMIT", "valueFrom": map[string]any{
			"resourceFieldRef": map[string]any{"resource": "limits.memory"}}},
	}
	r := render(t, values)
	ctrl := container(t, deployment(t, r, "controller"), "controller")
	if got, want := envNames(ctrl), []string{"POD_NAMESPACE", "TUNA_API_KEY", "HTTPS_PROXY", "GOMEMLIMIT"}; !slices.Equal(got, want) {
		t.Fatalf("controller env = %v, want %v", got, want)
	}
	if e := ctrl.Env[3]; e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("valueFrom entry = %+v", e)
	}
	if got := envNames(container(t, deployment(t, r, "agent"), "agent")); !slices.Equal(got, []string{"POD_NAMESPACE", "POD_NAME"}) {
		t.Errorf("agent env = %v, want [POD_NAMESPACE POD_NAME]", got)
	}
}

func TestPodAnnotationsAndLabels(t *testing.T) {
	r := render(t, withKey(t,
		"podAnnotations.vault\\.security\\.banzaicloud\\.io/vault-role=tuna-operator",
		"podAnnotations.example\\.com/team=edge",
		"podLabels.team=edge",
		"podAnnotations.kubectl\\.kubernetes\\.io/default-container=forged"))
	for _, comp := range []string{"controller", "agent"} {
		d := deployment(t, r, comp)
		ann := d.Spec.Template.Annotations
		if ann["vault.security.banzaicloud.io/vault-role"] != "tuna-operator" || ann["example.com/team"] != "edge" {
			t.Errorf("%s pod annotations = %v", comp, ann)
		}
		if ann["kubectl.kubernetes.io/default-container"] != comp {
			t.Errorf("%s default-container = %q", comp, ann["kubectl.kubernetes.io/default-container"])
		}
		l := d.Spec.Template.Labels
		if l["team"] != "edge" || l[ComponentLabel] != comp {
			t.Errorf("%s pod labels = %v", comp, l)
		}
		// The selector must still pick the pods.
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(l)) {
			t.Errorf("%s selector %v does not match its pods' labels %v (%v)", comp, d.Spec.Selector, l, err)
		}
	}
	// The chart's own annotations win over podAnnotations (checked above:
	// default-container is the component, not "forged").
}

func TestIngressClass(t *testing.T) {
	const defaultAnn = "ingressclass.kubernetes.io/is-default-class"
	get := func(r *Rendered) *networkingv1.IngressClass {
		m := r.Find("IngressClass", "tuna")
		if m == nil {
			return nil
		}
		var ic networkingv1.IngressClass
		if err := m.Into(&ic); err != nil {
			t.Fatal(err)
		}
		return &ic
	}
	ic := get(render(t, withKey(t)))
	if ic == nil {
		t.Fatal("no IngressClass tuna by default")
	}
	if ic.Spec.Controller != "k8s.tuna.am/ingress-controller" {
		t.Errorf("controller = %q", ic.Spec.Controller)
	}
	if _, ok := ic.Annotations[defaultAnn]; ok {
		t.Errorf("IngressClass is the default class by default: %v", ic.Annotations)
	}
	ic = get(render(t, withKey(t, "ingressClass.default=true")))
	if ic == nil || ic.Annotations[defaultAnn] != "true" {
		t.Errorf("ingressClass.default=true: %+v", ic)
	}
	if ic := get(render(t, withKey(t, "ingressClass.enabled=false"))); ic != nil {
		t.Error("ingressClass.enabled=false still renders the IngressClass")
	}
	renderFails(t, withKey(t, "ingressClass.enabled=false", "ingressClass.default=true"), "ingressClass.default=true needs ingressClass.enabled=true")
}

func TestMetricsServicesAndServiceMonitor(t *testing.T) {
	values := withKey(t)
	// --set-string: an annotation is a string ("true", not true).
	if err := strvals.ParseIntoString("metrics.service.annotations.prometheus\\.io/scrape=true", values); err != nil {
		t.Fatal(err)
	}
	r := render(t, values)
	if sm := r.OfKind("ServiceMonitor"); len(sm) != 0 {
		t.Errorf("ServiceMonitor rendered by default")
	}
	services := map[string]corev1.Service{}
	for _, comp := range []string{"controller", "agent"} {
		m := r.Find("Service", testFullname+"-"+comp+"-metrics")
		if m == nil {
			t.Fatalf("no metrics Service for %s", comp)
		}
		var s corev1.Service
		if err := m.Into(&s); err != nil {
			t.Fatal(err)
		}
		services[comp] = s
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 || s.Spec.Ports[0].TargetPort.String() != "metrics" || s.Spec.Ports[0].Name != "metrics" {
			t.Errorf("%s metrics Service ports = %+v", comp, s.Spec.Ports)
		}
		if s.Annotations["prometheus.io/scrape"] != "true" {
			t.Errorf("%s metrics Service annotations = %v", comp, s.Annotations)
		}
		// It selects exactly its component's pods.
		sel := labels.SelectorFromSet(s.Spec.Selector)
		for _, other := range []string{"controller", "agent"} {
			d := deployment(t, r, other)
			if got := sel.Matches(labels.Set(d.Spec.Template.Labels)); got != (other == comp) {
				t.Errorf("%s metrics Service selects %s pods: %v", comp, other, got)
			}
			if other == comp && container(t, d, comp).Ports[0].ContainerPort != 8080 {
				t.Errorf("%s container port = %+v", comp, container(t, d, comp).Ports)
			}
		}
	}

	r = render(t, withKey(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=kube-prometheus-stack", "metrics.serviceMonitor.interval=15s"))
	sms := r.OfKind("ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	sm := sms[0].Object
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "kube-prometheus-stack" || sm.GetNamespace() != DefaultNamespace {
		t.Errorf("ServiceMonitor = %v", sm.Object)
	}
	var spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sm.Object["spec"].(map[string]any), &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Endpoints) != 1 || spec.Endpoints[0].Port != "metrics" || spec.Endpoints[0].Path != "/metrics" || spec.Endpoints[0].Interval != "15s" {
		t.Errorf("endpoints = %+v", spec.Endpoints)
	}
	sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for comp, s := range services {
		if !sel.Matches(labels.Set(s.Labels)) {
			t.Errorf("ServiceMonitor selector %s does not select the %s metrics Service (%v)", sel, comp, s.Labels)
		}
	}
}

// Every pod and container of every workload runs restricted (R21), for
// every values combination.
func TestSecurityContexts(t *testing.T) {
	combos := map[string]map[string]any{
		"apiKey":         withKey(t),
		"existingSecret": vals(t, "edge.apiURL="+testEdgeURL, "credentials.existingSecret=s"),
		"extraEnv":       vals(t, "edge.apiURL="+testEdgeURL, "extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=v"),
		"everything on": withKey(t, "metrics.serviceMonitor.enabled=true", "ingressClass.default=true",
			"agentManager.allowExternalUpstreams=true", "controller.replicas=2", "clusterID=c1",
			"podAnnotations.a=b", "nodeSelector.disk=ssd"),
	}
	for name, values := range combos {
		t.Run(name, func(t *testing.T) {
			r := render(t, values)
			workloads := 0
			for _, m := range r.Manifests {
				podSpec, found, _ := unstructuredField(m.Object.Object, "spec", "template", "spec")
				if m.Kind() == "Pod" {
					podSpec, found = m.Object.Object["spec"].(map[string]any), true
				}
				if !found {
					continue
				}
				workloads++
				var spec corev1.PodSpec
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(podSpec.(map[string]any), &spec); err != nil {
					t.Fatal(err)
				}
				where := m.Kind() + "/" + m.Name()
				psc := spec.SecurityContext
				if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
					psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: pod securityContext = %+v", where, psc)
				}
				all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
				if len(all) == 0 {
					t.Errorf("%s: no containers", where)
				}
				for _, c := range all {
					sc := c.SecurityContext
					ok := sc != nil &&
						sc.RunAsNonRoot != nil && *sc.RunAsNonRoot &&
						sc.RunAsUser != nil && *sc.RunAsUser == 65532 &&
						sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
						sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
						(sc.Privileged == nil || !*sc.Privileged) &&
						sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0 &&
						sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
					if !ok {
						t.Errorf("%s container %s: securityContext = %+v", where, c.Name, sc)
					}
					if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
						c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
						t.Errorf("%s container %s: probes %+v %+v", where, c.Name, c.LivenessProbe, c.ReadinessProbe)
					}
					if hp := portNamed(c, "health"); hp != 8081 {
						t.Errorf("%s container %s: health port %d, want 8081", where, c.Name, hp)
					}
				}
				if spec.HostNetwork || spec.HostPID || spec.HostIPC || len(spec.Volumes) > 0 && hasHostPath(spec.Volumes) {
					t.Errorf("%s: host namespaces or hostPath volumes", where)
				}
			}
			if workloads != 2 {
				t.Errorf("%d workloads, want 2 (controller and agent)", workloads)
			}
		})
	}
}

func portNamed(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func hasHostPath(vs []corev1.Volume) bool {
	return slices.ContainsFunc(vs, func(v corev1.Volume) bool { return v.HostPath != nil })
}

func unstructuredField(obj map[string]any, path ...string) (any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[p]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

func TestDeployments(t *testing.T) {
	r := render(t, withKey(t, "controller.replicas=3"))
	agent := deployment(t, r, "agent")
	if agent.Spec.Replicas == nil || *agent.Spec.Replicas != 2 {
		t.Errorf("agent replicas = %v, want 2: a pool of two sessions per tunnel", agent.Spec.Replicas)
	}
	if s := agent.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable.String() != "0" || s.RollingUpdate.MaxSurge.String() != "1" {
		t.Errorf("agent strategy = %+v, want RollingUpdate with maxUnavailable 0, maxSurge 1", s)
	}
	spec := agent.Spec.Template.Spec
	if len(spec.TopologySpreadConstraints) != 1 || spec.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" ||
		spec.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/component"] != "agent" {
		t.Errorf("agent topology spread = %+v, want one over hostnames, ScheduleAnyway, on the agent pods", spec.TopologySpreadConstraints)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 35 {
		t.Errorf("agent terminationGracePeriodSeconds = %v, want 35: preStop 5s + drain 20s + 10s", spec.TerminationGracePeriodSeconds)
	}
	if ac := container(t, agent, "agent"); ac.Lifecycle == nil || ac.Lifecycle.PreStop == nil || ac.Lifecycle.PreStop.Sleep == nil ||
		ac.Lifecycle.PreStop.Sleep.Seconds != 5 || !hasArg(ac, "--drain-grace=20s") || !hasArg(ac, "--replicas=2") ||
		len(envNamed(ac, "POD_NAME")) != 1 {
		t.Errorf("agent: lifecycle %+v, args %v, env %v: want a 5s preStop sleep, --drain-grace=20s, --replicas=2, POD_NAME", ac.Lifecycle, ac.Args, envNames(ac))
	}
	if pdb := r.Find("PodDisruptionBudget", testFullname+"-agent"); pdb == nil {
		t.Errorf("no PodDisruptionBudget for two agent replicas")
	} else {
		var b policyv1.PodDisruptionBudget
		if err := pdb.Into(&b); err != nil {
			t.Fatal(err)
		}
		if b.Spec.MinAvailable == nil || b.Spec.MinAvailable.String() != "1" || b.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "agent" ||
			b.Spec.UnhealthyPodEvictionPolicy == nil || *b.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			t.Errorf("agent PodDisruptionBudget spec = %+v, want minAvailable 1 on the agent pods, unready ones always evictable", b.Spec)
		}
	}
	one := render(t, withKey(t, "agentManager.replicas=1", "agentManager.drainGrace=30s", "agentManager.preStopSeconds=0"))
	if one.Find("PodDisruptionBudget", testFullname+"-agent") != nil {
		t.Errorf("a PodDisruptionBudget for one agent replica would block every node drain")
	}
	if d := deployment(t, one, "agent"); *d.Spec.Template.Spec.TerminationGracePeriodSeconds != 40 || !hasArg(container(t, d, "agent"), "--drain-grace=30s") {
		t.Errorf("drainGrace=30s, preStopSeconds=0: grace %d, args %v", *d.Spec.Template.Spec.TerminationGracePeriodSeconds, container(t, d, "agent").Args)
	}
	ac := container(t, agent, "agent")
	if ac.Args[0] != "agent" || !hasArg(ac, "--keepalive-interval=15s") || !hasArg(ac, "--keepalive-timeout=45s") ||
		!hasArg(ac, "--metrics-bind-address=:8080") || !hasArg(ac, "--health-probe-bind-address=:8081") {
		t.Errorf("agent args = %v", ac.Args)
	}
	if hasArgPrefix(ac, "--edge-api-url") || hasArgPrefix(ac, "--leader-elect") {
		t.Errorf("agent has controller flags: %v", ac.Args)
	}
	if agent.Spec.Template.Spec.ServiceAccountName != testFullname+"-agent" {
		t.Errorf("agent ServiceAccount = %q", agent.Spec.Template.Spec.ServiceAccountName)
	}

	ctrl := deployment(t, r, "controller")
	if ctrl.Spec.Replicas == nil || *ctrl.Spec.Replicas != 3 {
		t.Errorf("controller replicas = %v, want 3", ctrl.Spec.Replicas)
	}
	cc := container(t, ctrl, "controller")
	if cc.Args[0] != "controller" || !hasArg(cc, "--edge-api-url="+testEdgeURL) || !hasArg(cc, "--leader-elect=true") ||
		!hasArg(cc, "--metrics-bind-address=:8080") || !hasArg(cc, "--health-probe-bind-address=:8081") {
		t.Errorf("controller args = %v", cc.Args)
	}
	if hasArgPrefix(cc, "--cluster-id") {
		t.Errorf("controller has --cluster-id without clusterID: %v", cc.Args)
	}
	if ctrl.Spec.Template.Spec.ServiceAccountName != testFullname+"-controller" {
		t.Errorf("controller ServiceAccount = %q", ctrl.Spec.Template.Spec.ServiceAccountName)
	}
	if d := deployment(t, render(t, withKey(t)), "controller"); *d.Spec.Replicas != 2 {
		t.Errorf("default controller replicas = %d, want 2: a leader and a standby", *d.Spec.Replicas)
	}

	cc = container(t, deployment(t, render(t, withKey(t, "clusterID=prod-eu-1")), "controller"), "controller")
	if !hasArg(cc, "--cluster-id=prod-eu-1") {
		t.Errorf("clusterID: controller args = %v", cc.Args)
	}
}

func TestAllowExternalUpstreams(t *testing.T) {
	for _, on := range []bool{false, true} {
		r := render(t, withKey(t, fmt.Sprintf("agentManager.allowExternalUpstreams=%v", on)))
		for _, comp := range []string{"controller", "agent"} {
			c := container(t, deployment(t, r, comp), comp)
			if got := hasArg(c, "--allow-external-upstreams"); got != on {
				t.Errorf("allowExternalUpstreams=%v: %s has the flag: %v (args %v)", on, comp, got, c.Args)
			}
		}
		if on != strings.Contains(r.Notes, "WARNING: agentManager.allowExternalUpstreams=true") {
			t.Errorf("allowExternalUpstreams=%v: NOTES warning mismatch:\n%s", on, r.Notes)
		}
	}
}

// watchNamespaces reaches both components as one --watch-namespaces flag;
// empty, neither gets it and both watch every namespace.
func TestWatchNamespacesFlag(t *testing.T) {
	for sets, want := range map[string]string{
		"":                                "",
		"watchNamespaces={team-a}":        "--watch-namespaces=team-a",
		"watchNamespaces={team-a,team-b}": "--watch-namespaces=team-a,team-b",
	} {
		values := withKey(t)
		if sets != "" {
			values = withKey(t, sets)
		}
		r := render(t, values)
		for _, comp := range []string{"controller", "agent"} {
			c := container(t, deployment(t, r, comp), comp)
			if want == "" && hasArgPrefix(c, "--watch-namespaces") {
				t.Errorf("default: %s has %v", comp, c.Args)
			}
			if want != "" && !hasArg(c, want) {
				t.Errorf("%s: %s args %v lack %s", sets, comp, c.Args, want)
			}
		}
	}
}

func TestImageResourcesAndScheduling(t *testing.T) {
	r := render(t, withKey(t))
	appVersion := r.Release.Chart.Metadata.AppVersion
	for _, comp := range []string{"controller", "agent"} {
		c := container(t, deployment(t, r, comp), comp)
		if c.Image != "code.tuna.am/tuna/tuna-k8s-operator:"+appVersion || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s image %q %q", comp, c.Image, c.ImagePullPolicy)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s resources = %+v", comp, c.Resources)
		}
	}
	values := withKey(t, "image.repository=registry.local/tuna", "image.tag=1.2.3", "image.pullPolicy=Always",
		"imagePullSecrets[0].name=regcred", "nodeSelector.disktype=ssd", "priorityClassName=system-cluster-critical",
		"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
		"controller.resources.limits.cpu=1", "agentManager.resources.limits.cpu=2")
	values["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}}}}}
	r = render(t, values)
	for comp, cpu := range map[string]string{"controller": "1", "agent": "2"} {
		d := deployment(t, r, comp)
		ps := d.Spec.Template.Spec
		c := container(t, d, comp)
		if c.Image != "registry.local/tuna:1.2.3" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("%s image %q %q", comp, c.Image, c.ImagePullPolicy)
		}
		if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("%s imagePullSecrets = %v", comp, ps.ImagePullSecrets)
		}
		if ps.NodeSelector["disktype"] != "ssd" || ps.PriorityClassName != "system-cluster-critical" {
			t.Errorf("%s nodeSelector %v priorityClassName %q", comp, ps.NodeSelector, ps.PriorityClassName)
		}
		if len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "dedicated" || ps.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("%s tolerations = %v", comp, ps.Tolerations)
		}
		if ps.Affinity == nil || ps.Affinity.NodeAffinity == nil ||
			ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "zone" {
			t.Errorf("%s affinity = %+v", comp, ps.Affinity)
		}
		if got := c.Resources.Limits.Cpu().String(); got != cpu {
			t.Errorf("%s cpu limit = %s, want %s", comp, got, cpu)
		}
	}
}

func TestKubeVersion(t *testing.T) {
	_, err := Render(withKey(t), Options{KubeVersion: "v1.31.9"})
	if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.32.0-0") {
		t.Errorf("Kubernetes 1.31: err = %v, want the kubeVersion constraint", err)
	}
	for _, v := range []string{"v1.32.0", "v1.33.4-gke.1245000", "v1.37.2"} {
		if _, err := Render(withKey(t), Options{KubeVersion: v}); err != nil {
			t.Errorf("Kubernetes %s: %v", v, err)
		}
	}
}

// Names fit Kubernetes' limits even for a long release name, and every
// object sits in the release namespace (or is cluster-scoped).
func TestNamesAndNamespaces(t *testing.T) {
	long := "a-very-long-release-name-for-the-tuna-operator-x"
	r, err := Render(withKey(t, "metrics.serviceMonitor.enabled=true"), Options{ReleaseName: long, Namespace: "tuna-ops"})
	if err != nil {
		t.Fatal(err)
	}
	clusterScoped := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "IngressClass": true, "FlowSchema": true}
	for _, m := range r.Manifests {
		name := m.Name()
		if m.Kind() == "Service" {
			if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
				t.Errorf("Service %s: %v", name, errs)
			}
		} else if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
			t.Errorf("%s %s: %v (length %d)", m.Kind(), name, errs, len(name))
		}
		if clusterScoped[m.Kind()] {
			if m.Namespace() != "" {
				t.Errorf("cluster-scoped %s %s has namespace %q", m.Kind(), name, m.Namespace())
			}
		} else if m.Namespace() != "tuna-ops" {
			t.Errorf("%s %s in namespace %q, want tuna-ops", m.Kind(), name, m.Namespace())
		}
	}
	r = render(t, withKey(t, "fullnameOverride=tuna"))
	if r.Find("Deployment", "tuna-controller") == nil || r.Find("ServiceAccount", "tuna-agent") == nil {
		t.Errorf("fullnameOverride=tuna: %v", r.Sources())
	}
}

// Every object the client-go scheme knows decodes strictly: no misspelt or
// misplaced field in a template.
func TestManifestsDecodeStrictly(t *testing.T) {
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
	values := withKey(t, "metrics.serviceMonitor.enabled=true", "ingressClass.default=true", "podAnnotations.a=b",
		"extraEnv[0].name=X", "extraEnv[0].value=y", "imagePullSecrets[0].name=r", "tolerations[0].operator=Exists")
	kinds := map[string]bool{}
	for _, m := range render(t, values).Manifests {
		kinds[m.Kind()] = true
		if m.Kind() == "ServiceMonitor" {
			continue
		}
		if _, _, err := strict.Decode([]byte(m.Content), nil, nil); err != nil {
			t.Errorf("%s %s (%s): %v", m.Kind(), m.Name(), m.Source, err)
		}
	}
	want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "FlowSchema", "IngressClass", "PodDisruptionBudget", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ServiceMonitor"}
	if got := slices.Sorted(maps.Keys(kinds)); !slices.Equal(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
}

func TestCRDsAndNotes(t *testing.T) {
	r := render(t, withKey(t))
	var names []string
	for _, c := range r.CRDs {
		if c.Kind() != "CustomResourceDefinition" {
			t.Errorf("crds/ holds a %s", c.Kind())
		}
		names = append(names, c.Name())
	}
	slices.Sort(names)
	if want := []string{"accesspolicies.k8s.tuna.am", "domains.k8s.tuna.am", "secretsyncs.k8s.tuna.am", "tcpendpoints.k8s.tuna.am", "tunnels.k8s.tuna.am"}; !slices.Equal(names, want) {
		t.Errorf("CRDs = %v, want %v", names, want)
	}
	if r.Find("CustomResourceDefinition", "tunnels.k8s.tuna.am") != nil {
		t.Error("CRDs among the templates' manifests")
	}
	if y := r.YAML(true); !strings.Contains(y, "# Source: tuna-k8s-operator/crds/") || strings.Index(y, "kind: CustomResourceDefinition") > strings.Index(y, "kind: Deployment") {
		t.Error("YAML(true) does not put the CRDs first")
	}
	for _, want := range []string{"kubectl get tunnel web", "kind: Tunnel", "url: http://web:8080",
		"kubectl get tunnels,domains,tcpendpoints --all-namespaces", "ingressClassName: tuna",
		"Secret " + testFullname + "-api-key", "kubectl delete tunnels,domains,tcpendpoints --all --all-namespaces"} {
		if !strings.Contains(r.Notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, r.Notes)
		}
	}
	notes := render(t, vals(t, "edge.apiURL="+testEdgeURL, "extraEnv[0].name=TUNA_API_KEY", "extraEnv[0].value=v", "ingressClass.enabled=false")).Notes
	if !strings.Contains(notes, "TUNA_API_KEY from extraEnv") || strings.Contains(notes, "ingressClassName: tuna") {
		t.Errorf("NOTES for extraEnv without IngressClass:\n%s", notes)
	}
}

// Values reports the merged values the chart rendered with.
func TestRenderedValues(t *testing.T) {
	in := withKey(t, "controller.replicas=2")
	r := render(t, in)
	if r.Values["controller"].(map[string]any)["replicas"] != float64(2) && fmt.Sprint(r.Values["controller"].(map[string]any)["replicas"]) != "2" {
		t.Errorf("controller.replicas = %v", r.Values["controller"])
	}
	if r.Values["image"].(map[string]any)["repository"] != "code.tuna.am/tuna/tuna-k8s-operator" {
		t.Errorf("defaults not merged: %v", r.Values["image"])
	}
	r.Values["edge"].(map[string]any)["apiURL"] = "changed"
	if in["edge"].(map[string]any)["apiURL"] != testEdgeURL {
		t.Error("Values aliases the caller's map")
	}
}
