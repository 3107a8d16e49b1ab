// Package preflight checks, before an install or upgrade, that the cluster,
// the values and the edge are ready for the operator, in the style of
// `linkerd check --pre`: Kubernetes version, the caller's permissions, the
// CRDs, IngressClass conflicts, the Gateway API's CRDs and whether a
// running operator serves them, LoadBalancer Services, the namespaces of
// watchNamespaces, the cluster id that retained reservations need, the
// Secrets of the AccessPolicies, the credentials source, the API key's
// scope, and the edge's API, access policy support and SSH transport.
package preflight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/chart"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/report"
	"code.tuna.am/tuna/k8s-operator/cli/pkg/values"
)

// MinKubernetes is the oldest supported Kubernetes (R23).
const MinKubernetes = "1.32"

// IngressController is the controller name of the chart's IngressClass.
const IngressController = "k8s.tuna.am/ingress-controller"

// Categories of the report.
const (
	CatKubernetes  = "kubernetes-api"
	CatPermissions = "permissions"
	CatCRDs        = "crds"
	CatIngress     = "ingress-class"
	CatValues      = values.Category
	CatCredentials = "credentials"
	CatEdge        = "edge"
)

// Categories are every category of the report, in the order Run reports
// them (the help and docs/cli.md list each).
var Categories = []string{CatKubernetes, CatValues, CatPermissions, CatCRDs, CatIngress, CatGatewayAPI,
	CatLoadBalancer, CatNamespaces, CatClusterID, CatAccess, CatCredentials, CatEdge}

// Options of a preflight run.
type Options struct {
	Release   string
	Namespace string
	// Values are the user's values (-f, --set).
	Values map[string]any
	// APIKey overrides the key to check (--api-key or $TUNA_API_KEY).
	APIKey string
	// APIKeyFrom says where APIKey came from, for messages.
	APIKeyFrom string
	// EdgeAPIURL overrides edge.apiURL.
	EdgeAPIURL string
	// EdgeAPIFingerprint overrides edge.apiFingerprint, EdgeAPICABundle
	// edge.apiCABundle (PEM).
	EdgeAPIFingerprint string
	EdgeAPICABundle    string
	// CRDs the cluster must have; nil means the chart's crds/.
	CRDs []*unstructured.Unstructured
	// Timeout of each network check.
	Timeout time.Duration
}

// Run runs every check and returns the report; a check that cannot run
// because an earlier one failed is reported as a warning that says so.
// Cluster may be nil when no kubeconfig could be loaded (connectErr).
func Run(ctx context.Context, c *cluster.Cluster, connectErr error, o Options) *report.Report {
	if o.Release == "" {
		o.Release = chart.DefaultReleaseName
	}
	if o.Namespace == "" {
		o.Namespace = chart.DefaultNamespace
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.EdgeAPIURL != "" {
		o.Values = values.MergeOverride(o.Values, "edge.apiURL", o.EdgeAPIURL)
	}
	if o.EdgeAPIFingerprint != "" {
		o.Values = values.MergeOverride(o.Values, "edge.apiFingerprint", o.EdgeAPIFingerprint)
	}
	if o.EdgeAPICABundle != "" {
		o.Values = values.MergeOverride(o.Values, "edge.apiCABundle", o.EdgeAPICABundle)
	}
	rep := &report.Report{}
	p := &run{c: c, o: o, rep: rep}

	kubeVersion := p.kubernetes(ctx, connectErr)
	rendered := p.values(kubeVersion)
	if p.clusterOK {
		p.permissions(ctx, rendered)
		p.crds(ctx)
		p.ingressClass(ctx, rendered)
		p.gatewayAPI(ctx, rendered)
		p.loadBalancers(ctx, rendered)
		p.watchNamespaces(ctx, rendered)
		p.clusterID(ctx, rendered)
		p.accessPolicies(ctx)
	}
	key := p.credentials(ctx, rendered)
	p.edge(ctx, rendered, key)
	rep.Finish()
	return rep
}

type run struct {
	c         *cluster.Cluster
	o         Options
	rep       *report.Report
	clusterOK bool
	creds     values.Credentials
	credsOK   bool
}

func (p *run) kubernetes(ctx context.Context, connectErr error) string {
	if connectErr != nil || p.c == nil {
		msg := "no cluster"
		if connectErr != nil {
			msg = connectErr.Error()
		}
		p.rep.Fail(CatKubernetes, "can initialize the client", msg, "set --kubeconfig (or KUBECONFIG) and --kube-context")
		return ""
	}
	p.rep.OK(CatKubernetes, "can initialize the client", "")
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	v, err := p.c.Ping(ctx)
	if err != nil {
		p.rep.Fail(CatKubernetes, "can query the Kubernetes API", err.Error(), "check that the API server "+p.c.Where+" is up and reachable from here")
		return ""
	}
	p.rep.OK(CatKubernetes, "can query the Kubernetes API", p.c.Where)
	p.clusterOK = true
	desc := "is running Kubernetes " + MinKubernetes + " or newer"
	found := fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch())
	if ok, _ := v.Compare(MinKubernetes + ".0"); ok < 0 {
		p.rep.Fail(CatKubernetes, desc, "the server runs "+found, "upgrade the cluster to Kubernetes "+MinKubernetes+" or newer (R23)")
	} else {
		p.rep.OK(CatKubernetes, desc, found)
	}
	return found
}

func (p *run) values(kubeVersion string) *chart.Rendered {
	r, err := values.Render(p.o.Values, chart.Options{ReleaseName: p.o.Release, Namespace: p.o.Namespace, KubeVersion: kubeVersion})
	if err != nil {
		var ie *values.InvalidError
		hint := ""
		if errors.As(err, &ie) {
			hint = ie.Hint
		}
		p.rep.Fail(CatValues, "values match values.schema.json and the chart's rules", err.Error(), hint)
		return nil
	}
	p.creds, p.credsOK = values.Check(r, p.rep)
	return r
}

// permissions asks the API server (SelfSubjectAccessReview) whether the
// caller may do what an install does: apply the CRDs, create every kind
// the chart renders, store the release (Secrets), create the namespace.
func (p *run) permissions(ctx context.Context, r *chart.Rendered) {
	type need struct {
		verb, group, resource, namespace string
	}
	needs := []need{
		{"create", "apiextensions.k8s.io", "customresourcedefinitions", ""},
		{"patch", "apiextensions.k8s.io", "customresourcedefinitions", ""},
		{"create", "", "secrets", p.o.Namespace}, // Helm's release storage
		{"list", "", "secrets", p.o.Namespace},
	}
	if _, err := p.c.Kube.CoreV1().Namespaces().Get(ctx, p.o.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		needs = append(needs, need{"create", "", "namespaces", ""})
	}
	var unserved []string
	if r != nil {
		for _, m := range r.Manifests {
			gvk := m.Object.GroupVersionKind()
			mapping, err := p.c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				unserved = append(unserved, fmt.Sprintf("%s %s (%s)", m.Object.GetAPIVersion(), m.Kind(), m.Name()))
				continue
			}
			ns := ""
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				// Roles of watchNamespaces go to their own namespaces.
				ns = cmp.Or(m.Namespace(), p.o.Namespace)
			}
			// Server-side apply is a PATCH that may create: both verbs.
			for _, verb := range []string{"create", "patch"} {
				n := need{verb, mapping.Resource.Group, mapping.Resource.Resource, ns}
				if !slices.Contains(needs, n) {
					needs = append(needs, n)
				}
			}
		}
	}
	var denied []string
	for _, n := range needs {
		ssar := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
			Verb: n.verb, Group: n.group, Resource: n.resource, Namespace: n.namespace,
		}}}
		res, err := p.c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
		if err != nil {
			p.rep.Fail(CatPermissions, "can check permissions (SelfSubjectAccessReview)", err.Error(), "the caller needs to create selfsubjectaccessreviews (every authenticated user may by default)")
			return
		}
		if !res.Status.Allowed {
			what := n.resource
			if n.group != "" {
				what += "." + n.group
			}
			if n.namespace != "" {
				what += " in namespace " + n.namespace
			}
			denied = append(denied, n.verb+" "+what)
		}
	}
	desc := "can create what the install needs"
	if len(denied) > 0 {
		p.rep.Fail(CatPermissions, desc, "denied: "+strings.Join(denied, ", "),
			"run as a cluster administrator, or have one grant these (Helm needs them to apply the CRDs, the RBAC, the IngressClass and the Deployments)")
	} else {
		p.rep.OK(CatPermissions, desc, fmt.Sprintf("%d permissions checked", len(needs)))
	}
	if len(unserved) > 0 {
		p.rep.Fail(CatPermissions, "the cluster serves every kind the chart renders", "not served: "+strings.Join(unserved, ", "),
			"install the CRDs they need (e.g. the Prometheus Operator's for metrics.serviceMonitor.enabled=true) or turn the value off")
	}
}

func (p *run) crds(ctx context.Context) {
	crds := p.o.CRDs
	if crds == nil {
		var err error
		if crds, err = cluster.ChartCRDs(); err != nil {
			p.rep.Fail(CatCRDs, "can read the chart's CRDs", err.Error(), "")
			return
		}
	}
	states, err := p.c.CompareCRDs(ctx, crds)
	if err != nil {
		p.rep.Fail(CatCRDs, "can compare the CRDs", err.Error(), "the caller needs get and patch on customresourcedefinitions")
		return
	}
	for _, st := range states {
		desc := fmt.Sprintf("CRD %s is installed and current", st.Name)
		switch st.State {
		case "missing":
			p.rep.Warn(CatCRDs, desc, "not installed", "`tuna-operator install` applies it first")
		case "stale":
			p.rep.Fail(CatCRDs, desc, "differs from this chart's: "+strings.Join(st.Changes, "; "),
				"run `tuna-operator upgrade`: it applies the chart's CRDs (server-side apply as field manager helm) before the release")
		default:
			p.rep.OK(CatCRDs, desc, "")
		}
	}
}

func (p *run) ingressClass(ctx context.Context, r *chart.Rendered) {
	if r == nil {
		return
	}
	enabled := values.Bool(r.Values, "ingressClass.enabled")
	isDefault := values.Bool(r.Values, "ingressClass.default")
	list, err := p.c.Kube.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		p.rep.Fail(CatIngress, "can list IngressClasses", err.Error(), "the caller needs list on ingressclasses.networking.k8s.io")
		return
	}
	desc := "no other IngressClass is named tuna"
	if !enabled {
		p.rep.OK(CatIngress, desc, "ingressClass.enabled=false: the chart creates none")
	} else {
		var conflict string
		hint := ""
		for _, ic := range list.Items {
			if ic.Name != "tuna" {
				continue
			}
			owner := ic.Annotations[cluster.HelmReleaseNameAnnotation] + "/" + ic.Annotations[cluster.HelmReleaseNamespaceAnnotation]
			switch {
			case ic.Spec.Controller != IngressController:
				conflict = fmt.Sprintf("IngressClass tuna exists for controller %s", ic.Spec.Controller)
				hint = "delete or rename that IngressClass, or set ingressClass.enabled=false"
			case owner == "/":
				conflict = "IngressClass tuna exists and is not managed by Helm, which refuses to take it over"
				hint = "delete it (kubectl delete ingressclass tuna) and let the chart create it, or set ingressClass.enabled=false"
			case owner != p.o.Release+"/"+p.o.Namespace:
				conflict = "IngressClass tuna belongs to release " + owner
				hint = "set ingressClass.enabled=false for this release: one IngressClass serves every release"
			}
		}
		if conflict != "" {
			p.rep.Fail(CatIngress, desc, conflict, hint)
		} else {
			p.rep.OK(CatIngress, desc, "")
		}
	}
	desc = "no other IngressClass is the default"
	if !isDefault {
		p.rep.OK(CatIngress, desc, "ingressClass.default=false")
		return
	}
	var others []string
	for _, ic := range list.Items {
		if ic.Name != "tuna" && ic.Annotations["ingressclass.kubernetes.io/is-default-class"] == "true" {
			others = append(others, ic.Name)
		}
	}
	if len(others) > 0 {
		p.rep.Fail(CatIngress, desc, "already the default: "+strings.Join(others, ", "),
			"set ingressClass.default=false, or remove the annotation ingressclass.kubernetes.io/is-default-class from "+strings.Join(others, ", ")+" (two defaults make Ingresses without a class fail)")
		return
	}
	p.rep.OK(CatIngress, desc, "")
}

// credentials checks the Secret the controller reads its key from and
// returns the API key to check against the edge, with where it came from.
func (p *run) credentials(ctx context.Context, r *chart.Rendered) (key apiKey) {
	if p.o.APIKey != "" {
		key = apiKey{p.o.APIKey, p.o.APIKeyFrom}
	}
	if r == nil || !p.credsOK {
		return key
	}
	c := p.creds
	if key.value == "" && c.APIKey != "" {
		key = apiKey{c.APIKey, c.Source}
	}
	if c.SecretName == "" || c.Source == values.SourceAPIKey {
		return key // the chart makes the Secret, or an injector provides the key
	}
	desc := fmt.Sprintf("Secret %s/%s has the key %s", p.o.Namespace, c.SecretName, c.SecretKey)
	if !p.clusterOK {
		p.rep.Warn(CatCredentials, desc, "not checked: no cluster", "")
		return key
	}
	data, err := SecretKey(ctx, p.c, p.o.Namespace, c.SecretName, c.SecretKey)
	if err != nil {
		var ce *CheckError
		if errors.As(err, &ce) {
			p.rep.Fail(CatCredentials, desc, ce.Msg, ce.Hint)
		} else {
			p.rep.Fail(CatCredentials, desc, err.Error(), "")
		}
		return key
	}
	p.rep.OK(CatCredentials, desc, "")
	if key.value == "" {
		key = apiKey{data, "Secret " + c.SecretName}
	}
	return key
}

// CheckError is a failed check with a hint.
type CheckError struct{ Msg, Hint string }

func (e *CheckError) Error() string { return e.Msg }

// SecretKey reads one key of a Secret, failing with a hint when the Secret
// or the key is missing or empty.
func SecretKey(ctx context.Context, c *cluster.Cluster, namespace, name, key string) (string, error) {
	s, err := c.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", &CheckError{
			Msg:  fmt.Sprintf("Secret %s does not exist in namespace %s", name, namespace),
			Hint: fmt.Sprintf("create it before installing: kubectl -n %s create secret generic %s --from-literal=%s=<API key> (or with External Secrets / Sealed Secrets)", namespace, name, key),
		}
	}
	if err != nil {
		return "", fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		if sv, ok2 := s.StringData[key]; ok2 {
			v, ok = []byte(sv), true
		}
	}
	if !ok {
		var have []string
		for k := range s.Data {
			have = append(have, k)
		}
		slices.Sort(have)
		return "", &CheckError{
			Msg:  fmt.Sprintf("Secret %s/%s has no key %s (it has: %s)", namespace, name, key, strings.Join(have, ", ")),
			Hint: fmt.Sprintf("store the API key under %s, e.g. kubectl -n %s patch secret %s --type=merge -p '{\"stringData\":{\"%s\":\"<API key>\"}}'", key, namespace, name, key),
		}
	}
	if strings.TrimSpace(string(v)) == "" {
		return "", &CheckError{Msg: fmt.Sprintf("Secret %s/%s has an empty %s", namespace, name, key), Hint: "store the API key in it"}
	}
	return strings.TrimSpace(string(v)), nil
}
