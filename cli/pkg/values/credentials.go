package values

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/edge/keys"
)

// The credentials sources of the chart (R26).
const (
	SourceAPIKey         = "credentials.apiKey"
	SourceExistingSecret = "credentials.existingSecret"
	SourceExtraEnv       = "extraEnv"
)

// APIKeyEnv is the variable the controller reads its API key from when it
// comes from extraEnv.
const APIKeyEnv = "TUNA_API_KEY"

// APIKeyVolume is the controller's volume of the key's Secret
// (credentials.apiKey or credentials.existingSecret), mounted as the file
// the controller watches (--api-key-file).
const APIKeyVolume = "api-key"

// SecretKey is the key of the API key in a credentials Secret.
const SecretKey = "api-key"

// Credentials is where the rendered chart takes the operator's API key from.
type Credentials struct {
	// Source is SourceAPIKey, SourceExistingSecret or SourceExtraEnv.
	Source string
	// APIKey is credentials.apiKey, or a plain extraEnv value.
	APIKey string
	// SecretName and SecretKey name the Secret the controller reads the
	// key from (the chart's own Secret, existingSecret, or an extraEnv
	// secretKeyRef); empty for an injector reference.
	SecretName, SecretKey string
	// EnvValue is the extraEnv value (e.g. an injector reference such as
	// vault:secret/data/tuna#api-key).
	EnvValue string
}

// Describe is a one-line summary, e.g. `credentials.existingSecret "tuna-api-key" (key api-key)`.
func (c Credentials) Describe() string {
	switch c.Source {
	case SourceAPIKey:
		return fmt.Sprintf("credentials.apiKey: the chart creates Secret %q (key %s)", c.SecretName, c.SecretKey)
	case SourceExistingSecret:
		return fmt.Sprintf("credentials.existingSecret: Secret %q, key %s", c.SecretName, c.SecretKey)
	default:
		if c.SecretName != "" {
			return fmt.Sprintf("extraEnv: %s from Secret %q, key %s", APIKeyEnv, c.SecretName, c.SecretKey)
		}
		return fmt.Sprintf("extraEnv: %s=%s (a secret injector replaces it in the pod)", APIKeyEnv, redact(c.EnvValue))
	}
}

func redact(v string) string {
	if _, err := keys.Parse(v); err == nil {
		return v[:5] + "…"
	}
	return v
}

// CredentialsOf reads the credentials source of a rendered chart from the
// controller Deployment it renders (the chart has already checked that
// there is exactly one source).
func CredentialsOf(r *chart.Rendered) (Credentials, error) {
	c := Credentials{}
	switch {
	case String(r.Values, "credentials.apiKey") != "":
		c.Source, c.APIKey = SourceAPIKey, String(r.Values, "credentials.apiKey")
	case String(r.Values, "credentials.existingSecret") != "":
		c.Source = SourceExistingSecret
	default:
		c.Source = SourceExtraEnv
	}
	d, err := controllerDeployment(r)
	if err != nil {
		return c, err
	}
	if c.Source != SourceExtraEnv {
		vol, err := apiKeyVolume(d)
		if err != nil {
			return c, err
		}
		c.SecretName, c.SecretKey = vol.SecretName, SecretKey
		return c, nil
	}
	env, err := controllerAPIKeyEnv(d)
	if err != nil {
		return c, err
	}
	if ref := secretRef(env); ref != nil {
		c.SecretName, c.SecretKey = ref.Name, ref.Key
	}
	c.EnvValue = env.Value
	if _, err := keys.Parse(env.Value); err == nil {
		c.APIKey = env.Value
	}
	return c, nil
}

func secretRef(env *corev1.EnvVar) *corev1.SecretKeySelector {
	if env.ValueFrom != nil {
		return env.ValueFrom.SecretKeyRef
	}
	return nil
}

// controllerDeployment is the controller Deployment the chart renders.
func controllerDeployment(r *chart.Rendered) (*appsv1.Deployment, error) {
	for _, m := range r.Component(chart.ComponentController) {
		if m.Kind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := m.Into(&d); err != nil {
			return nil, err
		}
		return &d, nil
	}
	return nil, fmt.Errorf("the chart rendered no controller Deployment: %w", chart.ErrNotFound)
}

// apiKeyVolume returns the Secret the controller mounts its key file from.
func apiKeyVolume(d *appsv1.Deployment) (*corev1.SecretVolumeSource, error) {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == APIKeyVolume && v.Secret != nil {
			return v.Secret, nil
		}
	}
	return nil, fmt.Errorf("the controller Deployment mounts no Secret volume %q for its API key", APIKeyVolume)
}

// controllerAPIKeyEnv returns the controller container's TUNA_API_KEY.
func controllerAPIKeyEnv(d *appsv1.Deployment) (*corev1.EnvVar, error) {
	var found []corev1.EnvVar
	for _, ctr := range d.Spec.Template.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name == APIKeyEnv {
				found = append(found, e)
			}
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("the controller Deployment sets %s %d times, want once", APIKeyEnv, len(found))
	}
	return &found[0], nil
}

// Category of the value checks in a report.
const Category = "values"

// Check adds the checks of rendered values that need no cluster: the
// credentials source and how TUNA_API_KEY is injected, the API key's
// shape, and the edge URL. It returns the credentials for the cluster and
// edge checks.
func Check(r *chart.Rendered, rep *report.Report) (Credentials, bool) {
	rep.OK(Category, "values match values.schema.json and the chart's rules", "")
	c, err := CredentialsOf(r)
	if err != nil {
		rep.Fail(Category, "the controller gets its API key from exactly one place", err.Error(), "set exactly one of credentials.apiKey, credentials.existingSecret or extraEnv with TUNA_API_KEY")
		return c, false
	}
	ok := true
	desc := "the operator's API key has exactly one source"
	rep.OK(Category, desc, c.Describe())

	switch c.Source {
	case SourceAPIKey:
		ok = checkKeyShape(rep, "credentials.apiKey", c.APIKey) && ok
	case SourceExtraEnv:
		ok = checkExtraEnv(r, c, rep) && ok
	}

	// The agent never holds the API key (R21): only per-tunnel keys.
	for _, m := range r.Component(chart.ComponentAgent) {
		if m.Kind() == "Deployment" && strings.Contains(m.Content, APIKeyEnv) {
			rep.Fail(Category, "only the controller gets the API key", "the agent Deployment references "+APIKeyEnv, "remove TUNA_API_KEY from the agent's environment")
			ok = false
		}
	}

	ok = checkEdgeURL(rep, String(r.Values, "edge.apiURL")) && ok
	return c, ok
}

func checkKeyShape(rep *report.Report, where, key string) bool {
	desc := where + " is an API key"
	k, err := keys.Parse(key)
	switch {
	case err != nil:
		rep.Warn(Category, desc, "it does not look like an API key (tuna_<id>_<secret>)", "copy the key as `tuna-edge keys create` or the Tuna console printed it")
		return true
	case k.Kind == keys.KindTunnel:
		rep.Fail(Category, desc, "it is a tunnel key (tunt_…), which cannot call the edge API", "create an API key with scope tunnels:write, e.g. tuna-edge keys create --scope tunnels:write --name tuna-operator")
		return false
	}
	rep.OK(Category, desc, "")
	return true
}

func checkExtraEnv(r *chart.Rendered, c Credentials, rep *report.Report) bool {
	desc := "extraEnv injects TUNA_API_KEY"
	d, err := controllerDeployment(r)
	if err != nil {
		rep.Fail(Category, desc, err.Error(), "")
		return false
	}
	env, err := controllerAPIKeyEnv(d)
	if err != nil {
		rep.Fail(Category, desc, err.Error(), "set extraEnv with TUNA_API_KEY once")
		return false
	}
	switch {
	case env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil:
		ref := env.ValueFrom.SecretKeyRef
		if ref.Name == "" || ref.Key == "" {
			rep.Fail(Category, desc, "valueFrom.secretKeyRef needs both name and key", "set extraEnv[].valueFrom.secretKeyRef.name and .key")
			return false
		}
		rep.OK(Category, desc, fmt.Sprintf("from Secret %q, key %s", ref.Name, ref.Key))
	case env.ValueFrom != nil:
		rep.Warn(Category, desc, "TUNA_API_KEY comes from a ConfigMap or a field, not a Secret", "keep the key in a Secret (credentials.existingSecret) or inject it with a secret injector")
	case env.Value == "":
		rep.Fail(Category, desc, "extraEnv sets TUNA_API_KEY with neither value nor valueFrom", "give it the injector's reference, e.g. value: vault:secret/data/tuna#api-key, or use credentials.existingSecret")
		return false
	case c.APIKey != "" || strings.HasPrefix(env.Value, string(keys.KindAPI)+"_") || strings.HasPrefix(env.Value, string(keys.KindTunnel)+"_"):
		rep.Warn(Category, desc, "TUNA_API_KEY is the key itself, in plain text in the Deployment", "use credentials.apiKey (a Secret) or an injector reference such as vault:secret/data/tuna#api-key")
		return checkKeyShape(rep, "extraEnv TUNA_API_KEY", env.Value)
	default:
		rep.OK(Category, desc, "injector reference "+env.Value)
		if strings.HasPrefix(env.Value, "vault:") && !hasAnnotationPrefix(r.Values, "vault.security.banzaicloud.io/") {
			rep.Warn(Category, "podAnnotations configure the secret injector",
				"TUNA_API_KEY is a vault: reference but podAnnotations has no vault.security.banzaicloud.io/ annotation",
				"set podAnnotations for Bank-Vaults, e.g. vault.security.banzaicloud.io/vault-addr and vault-role (see examples/values-bank-vaults.yaml)")
		}
	}
	return true
}

func hasAnnotationPrefix(vals map[string]any, prefix string) bool {
	m, _ := Get(vals, "podAnnotations").(map[string]any)
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func checkEdgeURL(rep *report.Report, raw string) bool {
	desc := "edge.apiURL is an http(s) URL"
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		rep.Fail(Category, desc, fmt.Sprintf("%q is not an http(s) URL", raw), "set edge.apiURL to the edge's control API, e.g. https://edge.example.com:8443")
		return false
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		rep.Warn(Category, desc, "plain HTTP: the API key crosses the network unencrypted", "use the edge's https:// API URL")
		return true
	}
	rep.OK(Category, desc, raw)
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
