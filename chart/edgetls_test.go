package chart

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const (
	testFingerprint = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testCABundle    = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"
)

func withCABundle(t *testing.T, bundle string, sets ...string) map[string]any {
	t.Helper()
	v := withKey(t, sets...)
	v["edge"].(map[string]any)["apiCABundle"] = bundle
	return v
}

// By default the controller trusts the system roots: no pin, no bundle.
func TestEdgeTLSDefault(t *testing.T) {
	r := render(t, withKey(t))
	d := deployment(t, r, "controller")
	for _, a := range container(t, d, "controller").Args {
		if strings.HasPrefix(a, "--edge-api-fingerprint") || strings.HasPrefix(a, "--edge-api-ca-file") {
			t.Errorf("default values give %s", a)
		}
	}
	if r.Find("ConfigMap", testFullname+"-edge-ca") != nil || volumeNamed(d, "edge-ca") != nil {
		t.Error("default values make an edge CA ConfigMap or volume")
	}
}

func TestEdgeAPIFingerprint(t *testing.T) {
	c := container(t, deployment(t, render(t, withKey(t, "edge.apiFingerprint="+testFingerprint)), "controller"), "controller")
	if !hasArg(c, "--edge-api-fingerprint="+testFingerprint) {
		t.Errorf("controller args = %v", c.Args)
	}
	agent := container(t, deployment(t, render(t, withKey(t, "edge.apiFingerprint="+testFingerprint)), "agent"), "agent")
	for _, a := range agent.Args {
		if strings.HasPrefix(a, "--edge-api") {
			t.Errorf("the agent, which never calls the API, got %s", a)
		}
	}
}

// The bundle goes to a ConfigMap mounted read-only into the controller, and
// a changed bundle restarts it.
func TestEdgeAPICABundle(t *testing.T) {
	r := render(t, withCABundle(t, testCABundle))
	m := r.Find("ConfigMap", testFullname+"-edge-ca")
	if m == nil {
		t.Fatalf("no edge CA ConfigMap; rendered %v", r.Sources())
	}
	var cm corev1.ConfigMap
	if err := m.Into(&cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["ca.crt"] != testCABundle {
		t.Errorf("ca.crt = %q", cm.Data["ca.crt"])
	}
	d := deployment(t, r, "controller")
	c := container(t, d, "controller")
	if !hasArg(c, "--edge-api-ca-file=/etc/tuna/edge-ca/ca.crt") {
		t.Errorf("controller args = %v", c.Args)
	}
	if vol := volumeNamed(d, "edge-ca"); vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != cm.Name {
		t.Fatalf("volumes = %+v", d.Spec.Template.Spec.Volumes)
	}
	// Next to the API key's volume, which the chart mounts as well.
	checkKeyFile(t, d, c, testFullname+"-api-key")
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == "edge-ca" {
			mount = &c.VolumeMounts[i]
		}
	}
	if len(c.VolumeMounts) != 2 || mount == nil || mount.MountPath != "/etc/tuna/edge-ca" || !mount.ReadOnly {
		t.Fatalf("volume mounts = %+v", c.VolumeMounts)
	}
	sum := d.Spec.Template.Annotations["checksum/edge-ca"]
	other := strings.Replace(testCABundle, "MIIBtest", "MIIBother", 1)
	if sum == "" || deployment(t, render(t, withCABundle(t, other)), "controller").Spec.Template.Annotations["checksum/edge-ca"] == sum {
		t.Errorf("checksum/edge-ca %q does not follow the bundle", sum)
	}
}

func TestEdgeTLSValuesRejected(t *testing.T) {
	const schemaErr = "values don't meet the specifications of the schema"
	renderFails(t, withKey(t, "edge.apiFingerprint=0123abcd"), schemaErr, "/edge/apiFingerprint")
	renderFails(t, withKey(t, "edge.apiFingerprint=sha1:"+strings.Repeat("ab", 20)), schemaErr, "/edge/apiFingerprint")
	renderFails(t, withCABundle(t, "/etc/ssl/ca.pem"), schemaErr, "/edge/apiCABundle")
	renderFails(t, withKey(t, "edge.apiURL=http://edge.example.com:8443", "edge.apiFingerprint="+testFingerprint),
		"edge.apiFingerprint and edge.apiCABundle verify TLS", "https://")
}
