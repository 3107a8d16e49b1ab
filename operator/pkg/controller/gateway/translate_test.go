package gateway

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>/out.yaml from what the code gives")

// resources is a case's in.yaml: a whole set of Gateway API objects and
// the reservations and facts they are evaluated against.
type resources struct {
	// Edge is what the edge says of itself (GET /v1/edge): its Gateway
	// addresses, any_host.
	Edge            apiwire.EdgeInfo      `json:"edge"`
	GatewayClasses  []gwv1.GatewayClass   `json:"gatewayClasses"`
	Gateways        []gwv1.Gateway        `json:"gateways"`
	HTTPRoutes      []gwv1.HTTPRoute      `json:"httpRoutes"`
	TCPRoutes       []gwv1.TCPRoute       `json:"tcpRoutes"`
	ReferenceGrants []gwv1.ReferenceGrant `json:"referenceGrants"`
	Services        []corev1.Service      `json:"services"`
	Secrets         []corev1.Secret       `json:"secrets"`
	Namespaces      []corev1.Namespace    `json:"namespaces"`
	Domains         []tunav1.Domain       `json:"domains"`
	TCPEndpoints    []tunav1.TCPEndpoint  `json:"tcpEndpoints"`
}

// result is a case's out.yaml: the status the controller writes, the
// Tunnels it makes for TCP listeners, and the route table the agent
// serves for each published host, in the order it tries the routes.
type result struct {
	GatewayClasses []classOut   `json:"gatewayClasses,omitempty"`
	Gateways       []gatewayOut `json:"gateways,omitempty"`
	HTTPRoutes     []routeOut   `json:"httpRoutes,omitempty"`
	TCPRoutes      []routeOut   `json:"tcpRoutes,omitempty"`
	Tunnels        []tunnelOut  `json:"tunnels,omitempty"`
	RouteTables    []tableOut   `json:"routeTables,omitempty"`
	// WaitsForService: the reconcile looks again soon, not at the resync.
	WaitsForService bool `json:"waitsForService,omitempty"`
}

type classOut struct {
	Name       string   `json:"name"`
	Conditions []string `json:"conditions"`
}

type gatewayOut struct {
	Name       string        `json:"name"`
	Conditions []string      `json:"conditions"`
	Addresses  []string      `json:"addresses,omitempty"`
	Listeners  []listenerOut `json:"listeners"`
}

type listenerOut struct {
	Name           string   `json:"name"`
	SupportedKinds []string `json:"supportedKinds"`
	AttachedRoutes int32    `json:"attachedRoutes"`
	Conditions     []string `json:"conditions"`
}

type routeOut struct {
	Name    string      `json:"name"`
	Parents []parentOut `json:"parents"`
}

type parentOut struct {
	ParentRef  string   `json:"parentRef"`
	Conditions []string `json:"conditions"`
}

type tunnelOut struct {
	Name     string `json:"name"`
	Owner    string `json:"owner"`
	Port     string `json:"portOrAlias"`
	Upstream string `json:"upstream"`
}

type tableOut struct {
	Host   string     `json:"host"`
	Routes []entryOut `json:"routes"`
}

type entryOut struct {
	Rule     string                 `json:"rule"`
	Match    string                 `json:"match"`
	Filters  []gwv1.HTTPRouteFilter `json:"filters,omitempty"`
	Backends []string               `json:"backends,omitempty"`
}

// TestTranslateGolden runs every case of testdata/: the objects of
// in.yaml through the controller's translation (translate, the one
// Reconcile runs) and the agent's route table of each published host
// (model.RulesOfHost, the router's precedence), compared
// with out.yaml. go test -update rewrites out.yaml after a change that
// is meant; review the diff.
func TestTranslateGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "*", "in.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, cases, "no testdata/<case>/in.yaml")
	for _, in := range cases {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			data, err := os.ReadFile(in)
			require.NoError(t, err)
			var res resources
			require.NoError(t, yaml.UnmarshalStrict(data, &res), "%s", in)
			got, err := yaml.Marshal(run(t, res))
			require.NoError(t, err)
			path := filepath.Join(dir, "out.yaml")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "go test -update writes it")
			assert.Equal(t, string(want), string(got), "%s differs from what the code gives (go test ./operator/pkg/controller/gateway -run TestTranslateGolden -update rewrites it after a review)", path)
		})
	}
}

// run translates res as one reconcile does, and builds each published
// host's route table as the agent does.
func run(t *testing.T, res resources) result {
	t.Helper()
	services := map[string]bool{}
	for _, s := range res.Services {
		services[s.Namespace+"/"+s.Name] = true
	}
	secrets := map[string]*corev1.Secret{}
	for i := range res.Secrets {
		secrets[res.Secrets[i].Namespace+"/"+res.Secrets[i].Name] = &res.Secrets[i]
	}
	nsLabels := func(ns string) labels.Set {
		for _, n := range res.Namespaces {
			if n.Name == ns {
				return labels.Set(n.Labels)
			}
		}
		return nil
	}
	in := snapshot{
		gateways:        model.ServedAmong(res.GatewayClasses, res.Gateways),
		domains:         res.Domains,
		endpoints:       res.TCPEndpoints,
		grants:          res.ReferenceGrants,
		httpRoutes:      res.HTTPRoutes,
		tcpRoutes:       res.TCPRoutes,
		serveTCP:        true,
		edge:            &res.Edge,
		namespaceLabels: nsLabels,
		service:         func(ns, name string) (bool, error) { return services[ns+"/"+name], nil },
		secret:          func(ns, name string) (*corev1.Secret, error) { return secrets[ns+"/"+name], nil },
	}
	tr, err := translate(in)
	require.NoError(t, err)

	var out result
	for i := range res.GatewayClasses {
		gc := &res.GatewayClasses[i]
		if gatewayclass.Ours(gc) {
			out.GatewayClasses = append(out.GatewayClasses, classOut{Name: gc.Name, Conditions: conditions(classStatus(gc).Conditions)})
		}
	}
	for _, gw := range in.gateways {
		key := client.ObjectKeyFromObject(gw)
		st := gatewayStatus(tr.evaluated[key], tr.attached[key])
		g := gatewayOut{Name: gw.Namespace + "/" + gw.Name, Conditions: conditions(st.Conditions)}
		for _, a := range st.Addresses {
			g.Addresses = append(g.Addresses, fmt.Sprintf("%s %s", *a.Type, a.Value))
		}
		for _, l := range st.Listeners {
			lo := listenerOut{Name: string(l.Name), AttachedRoutes: l.AttachedRoutes, Conditions: conditions(l.Conditions), SupportedKinds: []string{}}
			for _, k := range l.SupportedKinds {
				lo.SupportedKinds = append(lo.SupportedKinds, string(k.Kind))
			}
			g.Listeners = append(g.Listeners, lo)
		}
		out.Gateways = append(out.Gateways, g)
	}
	for _, n := range tr.httpRoutes {
		out.HTTPRoutes = append(out.HTTPRoutes, routeStatus(n.route, n.parents))
	}
	for _, n := range tr.tcpRoutes {
		out.TCPRoutes = append(out.TCPRoutes, routeStatus(n.route, n.parents))
	}
	for _, tun := range tr.tunnels {
		owner := ""
		for _, o := range tun.OwnerReferences {
			owner = o.Kind + " " + o.Name
		}
		out.Tunnels = append(out.Tunnels, tunnelOut{Name: tun.Namespace + "/" + tun.Name, Owner: owner, Port: tun.Spec.PortOrAlias, Upstream: tun.Spec.Upstream.URL})
	}
	slices.SortFunc(out.Tunnels, func(a, b tunnelOut) int { return strings.Compare(a.Name, b.Name) })
	out.RouteTables = routeTables(tr, in)
	out.WaitsForService = waitsForService(tr.httpRoutes)
	return out
}

func routeStatus(rt client.Object, parents []gwv1.RouteParentStatus) routeOut {
	r := routeOut{Name: rt.GetNamespace() + "/" + rt.GetName(), Parents: []parentOut{}}
	for _, p := range parents {
		r.Parents = append(r.Parents, parentOut{ParentRef: parentRef(p.ParentRef, rt.GetNamespace()), Conditions: conditions(p.Conditions)})
	}
	return r
}

// routeTables are the route tables of the hosts that accepted listeners
// publish, as the agent builds them: the routes attached to the host
// through the Gateways that publish it, their rules in the router's
// order. Rules with a problem are left out, as the agent leaves them.
func routeTables(tr translation, in snapshot) []tableOut {
	publishers := map[string][]*gwv1.Gateway{}
	for _, gw := range in.gateways {
		// The agent reads the Gateway with the status the controller
		// wrote: its own address, its listeners' conditions.
		key := client.ObjectKeyFromObject(gw)
		written := gw.DeepCopy()
		written.Status = gatewayStatus(tr.evaluated[key], tr.attached[key])
		hosts := []string{model.OwnAddress(written)}
		for _, l := range tr.evaluated[key].Listeners {
			if l.Accepted {
				hosts = append(hosts, l.Host)
			}
		}
		for _, h := range hosts {
			if h != "" && !slices.Contains(publishers[h], written) {
				publishers[h] = append(publishers[h], written)
			}
		}
	}
	var out []tableOut
	for _, host := range sortedKeys(publishers) {
		rules := model.RulesOfHost(host, publishers[host], in.httpRoutes, in.namespaceLabels)
		var routes []router.Route
		byName := map[int]model.Rule{}
		for _, rule := range rules {
			if rule.Problem != "" {
				continue
			}
			byName[rule.Rank] = rule
			routes = append(routes, router.Route{Type: rule.Type, Path: rule.Path, Name: rule.Name(), Conditions: rule.Conditions, Rank: 1 + rule.Rank})
		}
		table := tableOut{Host: host, Routes: []entryOut{}}
		for _, r := range router.NewTable(routes, nil).Routes() {
			rule := byName[r.Rank-1]
			e := entryOut{Rule: r.Name, Match: match(r), Filters: rule.Filters}
			for _, b := range rule.Backends {
				e.Backends = append(e.Backends, backend(rule.Route.Namespace, b))
			}
			table.Routes = append(table.Routes, e)
		}
		out = append(out, table)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// match says what a route matches: path, then its conditions.
func match(r router.Route) string {
	kind := "Prefix"
	if r.Type == pubhost.Exact {
		kind = "Exact"
	}
	path := r.Path
	if path == "" {
		path = "/"
	}
	parts := []string{kind + " " + path}
	if c := r.Conditions; c != nil {
		if c.Host != "" {
			parts = append(parts, "host "+c.Host)
		}
		if c.Method != "" {
			parts = append(parts, "method "+c.Method)
		}
		for _, h := range c.Headers {
			parts = append(parts, "header "+valueMatch(h))
		}
		for _, q := range c.Query {
			parts = append(parts, "query "+valueMatch(q))
		}
	}
	return strings.Join(parts, ", ")
}

func valueMatch(v pubhost.ValueMatch) string {
	if v.Regexp != nil {
		return v.Name + " ~ " + v.Regexp.String()
	}
	return v.Name + " = " + v.Value
}

func backend(ns string, b gwv1.HTTPBackendRef) string {
	ref := b.BackendObjectReference
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	s := ns + "/" + string(ref.Name)
	if ref.Kind != nil && *ref.Kind != "Service" {
		s = string(*ref.Kind) + " " + s
	}
	if ref.Port != nil {
		s += fmt.Sprintf(":%d", *ref.Port)
	}
	weight := int32(1)
	if b.Weight != nil {
		weight = *b.Weight
	}
	return fmt.Sprintf("%s weight %d", s, weight)
}

func parentRef(p gwv1.ParentReference, ns string) string {
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	s := ns + "/" + string(p.Name)
	if p.SectionName != nil {
		s += " section " + string(*p.SectionName)
	}
	if p.Port != nil {
		s += fmt.Sprintf(" port %d", *p.Port)
	}
	return s
}

// conditions are written one a line, Type=Status Reason: message, in
// their order (transition times differ from run to run).
func conditions(cs []metav1.Condition) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}
