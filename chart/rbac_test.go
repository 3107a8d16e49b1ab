package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The exact RBAC of each component (R21: least privilege). A change here
// is a change of what the operator may do in users' clusters: review it.
func TestRBACExact(t *testing.T) {
	r := render(t, withKey(t))

	ctrl, err := r.RBAC(ComponentController)
	if err != nil {
		t.Fatal(err)
	}
	wantCtrlCluster := map[string][]string{
		"k8s.tuna.am/tunnels":                             {"create", "delete", "get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/domains":                             {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/tcpendpoints":                        {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/services":                                       {"get", "list", "patch", "watch"},
		"/services/status":                                {"patch"},
		"/services/finalizers":                            {"update"},
		"k8s.tuna.am/secretsyncs":                         {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/accesspolicies":                      {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/accesspolicies/status":               {"get", "patch", "update"},
		"k8s.tuna.am/accesspolicies/finalizers":           {"update"},
		"/secrets":                                        {"get"},
		"k8s.tuna.am/tunnels/status":                      {"get", "patch", "update"},
		"k8s.tuna.am/domains/status":                      {"get", "patch", "update"},
		"k8s.tuna.am/tcpendpoints/status":                 {"get", "patch", "update"},
		"k8s.tuna.am/secretsyncs/status":                  {"get", "patch", "update"},
		"k8s.tuna.am/tunnels/finalizers":                  {"update"},
		"k8s.tuna.am/domains/finalizers":                  {"update"},
		"k8s.tuna.am/tcpendpoints/finalizers":             {"update"},
		"k8s.tuna.am/secretsyncs/finalizers":              {"update"},
		"networking.k8s.io/ingresses":                     {"get", "list", "watch"},
		"networking.k8s.io/ingressclasses":                {"get", "list", "watch"},
		"gateway.networking.k8s.io/gateways":              {"get", "list", "watch"},
		"gateway.networking.k8s.io/httproutes":            {"get", "list", "watch"},
		"gateway.networking.k8s.io/referencegrants":       {"get", "list", "watch"},
		"gateway.networking.k8s.io/gateways/status":       {"get", "patch", "update"},
		"gateway.networking.k8s.io/httproutes/status":     {"get", "patch", "update"},
		"gateway.networking.k8s.io/tcproutes":             {"get", "list", "watch"},
		"gateway.networking.k8s.io/tcproutes/status":      {"get", "patch", "update"},
		"gateway.networking.k8s.io/gateways/finalizers":   {"update"},
		"gateway.networking.k8s.io/gatewayclasses":        {"get", "list", "watch"},
		"gateway.networking.k8s.io/gatewayclasses/status": {"get", "patch", "update"},
		"/namespaces:kube-system":                         {"get"},
		"events.k8s.io/events":                            {"create", "patch"},
	}
	wantCtrlNS := map[string][]string{
		"/secrets":                   {"create", "delete", "get", "patch"},
		"coordination.k8s.io/leases": {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/events":                    {"create", "patch"},
	}
	compareGrants(t, "controller ClusterRole", grants(ctrl.ClusterRules()), wantCtrlCluster)
	compareGrants(t, "controller Role", grants(ctrl.NamespaceRules()), wantCtrlNS)

	agent, err := r.RBAC(ComponentAgent)
	if err != nil {
		t.Fatal(err)
	}
	wantAgentCluster := map[string][]string{
		"k8s.tuna.am/tunnels":                          {"get", "list", "watch"},
		"k8s.tuna.am/accesspolicies":                   {"get"},
		"k8s.tuna.am/tunnels/status":                   {"get", "patch", "update"},
		"networking.k8s.io/ingresses":                  {"get", "list", "watch"},
		"networking.k8s.io/ingresses/status":           {"get", "patch", "update"},
		"networking.k8s.io/ingressclasses":             {"get", "list", "watch"},
		"gateway.networking.k8s.io/gateways":           {"get", "list", "watch"},
		"gateway.networking.k8s.io/httproutes":         {"get", "list", "watch"},
		"gateway.networking.k8s.io/referencegrants":    {"get", "list", "watch"},
		"gateway.networking.k8s.io/backendtlspolicies": {"get", "list", "watch"},
		"gateway.networking.k8s.io/gatewayclasses":     {"get", "list", "watch"},
		"/services":                       {"get"},
		"/secrets":                        {"get"},
		"/configmaps":                     {"get"},
		"discovery.k8s.io/endpointslices": {"list", "watch"},
		"events.k8s.io/events":            {"create", "patch"},
	}
	compareGrants(t, "agent ClusterRole", grants(agent.ClusterRules()), wantAgentCluster)
	if len(ctrl.Roles) != 1 || ctrl.RoleNamespaces()[0] != DefaultNamespace {
		t.Errorf("controller Roles %v, want one in the release namespace", ctrl.RoleNamespaces())
	}
	// One Role, in the release namespace: the heartbeat Leases only.
	if got := agent.RoleNamespaces(); len(got) != 1 || got[0] != DefaultNamespace || len(agent.RoleBindings) != 1 {
		t.Errorf("agent Roles in %v (%d RoleBindings), want one in the release namespace", got, len(agent.RoleBindings))
	}
	compareGrants(t, "agent Role", grants(agent.NamespaceRules()), agentLeaseGrants)

	// The promises of R21, checked with RBAC's matching rules (wildcards
	// included), whatever the rules' layout.
	all := func(b *RBAC) []string {
		var v []string
		for _, rule := range append(b.ClusterRules(), b.NamespaceRules()...) {
			v = append(v, rule.Verbs...)
			v = append(v, rule.Resources...)
			v = append(v, rule.APIGroups...)
		}
		return v
	}
	for _, b := range []*RBAC{ctrl, agent} {
		if slices.Contains(all(b), "*") {
			t.Errorf("%s RBAC has a wildcard", b.Component)
		}
	}
	// The controller gets (by name) the Secrets an AccessPolicy names;
	// it never enumerates Secrets.
	for _, verb := range []string{"list", "watch"} {
		if allows(ctrl.ClusterRules(), "", "secrets", verb, "any") || allows(ctrl.NamespaceRules(), "", "secrets", verb, "any") {
			t.Errorf("controller may %s Secrets", verb)
		}
	}
	for _, verb := range []string{"list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
		for _, res := range []string{"secrets", "services", "configmaps"} {
			if allows(agent.ClusterRules(), "", res, verb, "x") {
				t.Errorf("agent may %s %s; it may only get them", verb, res)
			}
		}
	}
	if !allows(agent.ClusterRules(), "", "secrets", "get", "tuna-tunnel-x") || !allows(agent.ClusterRules(), "", "services", "get", "web") {
		t.Error("agent may not get Secrets and Services")
	}
	// LoadBalancer Services: the controller reads Services and writes
	// their finalizer and status, never their spec, and never deletes them.
	for _, verb := range []string{"update", "create", "delete", "deletecollection"} {
		if allows(ctrl.ClusterRules(), "", "services", verb, "web") {
			t.Errorf("controller may %s Services", verb)
		}
	}
	if allows(ctrl.ClusterRules(), "", "services/status", "update", "web") {
		t.Error("controller may update the whole status of Services; it patches status.loadBalancer only")
	}
	// loadBalancer.enabled=false: no access to Services, and TCPEndpoints
	// are no longer created or deleted. Tunnels still are: a Gateway's TCP
	// listener is served by one.
	noLB, err := render(t, withKey(t, "loadBalancer.enabled=false")).RBAC(ComponentController)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"services", "services/status", "services/finalizers"} {
		for _, verb := range []string{"get", "list", "watch", "patch", "update"} {
			if allows(noLB.ClusterRules(), "", res, verb, "web") {
				t.Errorf("loadBalancer.enabled=false: controller may %s %s", verb, res)
			}
		}
	}
	if allows(noLB.ClusterRules(), "k8s.tuna.am", "tcpendpoints", "create", "") || allows(noLB.ClusterRules(), "k8s.tuna.am", "tcpendpoints", "delete", "x") {
		t.Error("loadBalancer.enabled=false: controller may still create or delete TCPEndpoints")
	}
	if allows(ctrl.ClusterRules(), "", "namespaces", "get", "default") || allows(ctrl.ClusterRules(), "", "namespaces", "list", "") {
		t.Error("controller may read namespaces other than kube-system")
	}

	// gatewayClass.namespaceSelectors lets both read namespaces' labels
	// (get, never list), for allowedRoutes selectors.
	sel := render(t, withKey(t, "gatewayClass.namespaceSelectors=true"))
	for _, comp := range []string{ComponentController, ComponentAgent} {
		b, err := sel.RBAC(comp)
		if err != nil {
			t.Fatal(err)
		}
		if !allows(b.ClusterRules(), "", "namespaces", "get", "team-a") || allows(b.ClusterRules(), "", "namespaces", "list", "") {
			t.Errorf("%s with gatewayClass.namespaceSelectors: want get (only) on every namespace", comp)
		}
	}
	if agent, err := render(t, withKey(t)).RBAC(ComponentAgent); err != nil || allows(agent.ClusterRules(), "", "namespaces", "get", "team-a") {
		t.Errorf("agent may read namespaces by default (%v)", err)
	}

	// With clusterID set, the controller needs no access to namespaces.
	ctrl2, err := render(t, withKey(t, "clusterID=c1")).RBAC(ComponentController)
	if err != nil {
		t.Fatal(err)
	}
	if allows(ctrl2.ClusterRules(), "", "namespaces", "get", "kube-system") {
		t.Error("clusterID set: controller may still get namespace kube-system")
	}
}

func compareGrants(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("%s: %s verbs = %v, want %v", what, k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected grant %s %v", what, k, got[k])
		}
	}
}

// With secretSync.enabled the controller may get, write and delete
// Secrets by name in the namespaces it serves, and still never list or
// watch them; the agent's RBAC does not change.
func TestRBACSecretSync(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		in     func(*RBAC) []rbacv1.PolicyRule
		ns     string
	}{
		{"all namespaces", []string{"secretSync.enabled=true"}, func(b *RBAC) []rbacv1.PolicyRule { return b.ClusterRules() }, "team-a"},
		{"watched namespaces", []string{"secretSync.enabled=true", "watchNamespaces={team-a}"}, func(b *RBAC) []rbacv1.PolicyRule { return b.RulesIn("team-a") }, "team-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctrl, err := render(t, withKey(t, tc.values...)).RBAC(ComponentController)
			if err != nil {
				t.Fatal(err)
			}
			rules := tc.in(ctrl)
			for _, verb := range []string{"get", "create", "patch", "delete"} {
				if !allows(rules, "", "secrets", verb, "db-credentials") {
					t.Errorf("controller may not %s Secrets in %s", verb, tc.ns)
				}
			}
			for _, verb := range []string{"list", "watch", "update", "deletecollection"} {
				if allows(ctrl.ClusterRules(), "", "secrets", verb, "x") || allows(ctrl.RulesIn(tc.ns), "", "secrets", verb, "x") {
					t.Errorf("controller may %s Secrets", verb)
				}
			}
		})
	}
	// Off (the default): no access to Secrets outside the release namespace.
	ctrl, err := render(t, withKey(t)).RBAC(ComponentController)
	if err != nil {
		t.Fatal(err)
	}
	if allows(ctrl.ClusterRules(), "", "secrets", "patch", "x") {
		t.Error("secretSync off: controller may still write Secrets cluster-wide")
	}
}

// RBAC() is what the end-to-end harness applies and impersonates.
func TestRBACForHarness(t *testing.T) {
	r, err := Render(withKey(t), Options{ReleaseName: "e2e", Namespace: "tuna-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, comp := range []string{ComponentController, ComponentAgent} {
		b, err := r.RBAC(comp)
		if err != nil {
			t.Fatal(err)
		}
		want := "system:serviceaccount:tuna-e2e:e2e-tuna-k8s-operator-" + comp
		if b.Username() != want {
			t.Errorf("%s Username = %q, want %q", comp, b.Username(), want)
		}
		if !slices.Contains(b.Groups(), "system:serviceaccounts:tuna-e2e") {
			t.Errorf("%s Groups = %v", comp, b.Groups())
		}
		// The Deployment runs as that ServiceAccount.
		var d struct{ name string }
		for _, m := range r.Component(comp) {
			if m.Kind() == "Deployment" {
				sa, _, _ := unstructuredField(m.Object.Object, "spec", "template", "spec", "serviceAccountName")
				d.name, _ = sa.(string)
			}
		}
		if d.name != b.ServiceAccount.Name {
			t.Errorf("%s Deployment runs as %q, RBAC is for %q", comp, d.name, b.ServiceAccount.Name)
		}
		objs := b.Objects()
		kinds := map[string]int{}
		for _, o := range objs {
			gvk := o.GetObjectKind().GroupVersionKind()
			if gvk.Kind == "" || gvk.Version == "" {
				t.Errorf("%s: object %s has no apiVersion/kind, a client cannot create it", comp, o.GetName())
			}
			if o.GetResourceVersion() != "" || o.GetUID() != "" {
				t.Errorf("%s: object %s carries server fields", comp, o.GetName())
			}
			kinds[gvk.Kind]++
		}
		// Both have a Role in the release namespace: the controller's
		// key Secrets and leader election, the agent's heartbeat Leases.
		want2 := map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1}
		if !maps.Equal(kinds, want2) {
			t.Errorf("%s objects = %v, want %v", comp, kinds, want2)
		}
		if kinds := objs[0].GetObjectKind().GroupVersionKind().Kind; kinds != "ServiceAccount" {
			t.Errorf("%s: first object is a %s, want the ServiceAccount", comp, kinds)
		}
	}
	if _, err := r.RBAC("nope"); err == nil || !strings.Contains(err.Error(), "0 ServiceAccounts") {
		t.Errorf("unknown component: err = %v", err)
	}
}

// With watchNamespaces, the namespaced permissions of both components are
// Roles in the listed namespaces, and the ClusterRoles keep only what is
// cluster-scoped: the agent can get Secrets in the listed namespaces and
// its own, nowhere else.
func TestRBACWatchNamespaces(t *testing.T) {
	r := render(t, withKey(t, "watchNamespaces={team-a,team-b}"))
	release := DefaultNamespace

	ctrl, err := r.RBAC(ComponentController)
	if err != nil {
		t.Fatal(err)
	}
	compareGrants(t, "controller ClusterRole", grants(ctrl.ClusterRules()), map[string][]string{
		"networking.k8s.io/ingressclasses":                {"get", "list", "watch"},
		"gateway.networking.k8s.io/gatewayclasses":        {"get", "list", "watch"},
		"gateway.networking.k8s.io/gatewayclasses/status": {"get", "patch", "update"},
		"/namespaces:kube-system":                         {"get"},
	})
	wantCtrlWatched := map[string][]string{
		"k8s.tuna.am/tunnels":                           {"create", "delete", "get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/domains":                           {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/tcpendpoints":                      {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/services":                                     {"get", "list", "patch", "watch"},
		"/services/status":                              {"patch"},
		"/services/finalizers":                          {"update"},
		"k8s.tuna.am/secretsyncs":                       {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/accesspolicies":                    {"get", "list", "patch", "update", "watch"},
		"k8s.tuna.am/accesspolicies/status":             {"get", "patch", "update"},
		"k8s.tuna.am/accesspolicies/finalizers":         {"update"},
		"/secrets":                                      {"get"},
		"k8s.tuna.am/tunnels/status":                    {"get", "patch", "update"},
		"k8s.tuna.am/domains/status":                    {"get", "patch", "update"},
		"k8s.tuna.am/tcpendpoints/status":               {"get", "patch", "update"},
		"k8s.tuna.am/secretsyncs/status":                {"get", "patch", "update"},
		"k8s.tuna.am/tunnels/finalizers":                {"update"},
		"k8s.tuna.am/domains/finalizers":                {"update"},
		"k8s.tuna.am/tcpendpoints/finalizers":           {"update"},
		"k8s.tuna.am/secretsyncs/finalizers":            {"update"},
		"networking.k8s.io/ingresses":                   {"get", "list", "watch"},
		"gateway.networking.k8s.io/gateways":            {"get", "list", "watch"},
		"gateway.networking.k8s.io/httproutes":          {"get", "list", "watch"},
		"gateway.networking.k8s.io/referencegrants":     {"get", "list", "watch"},
		"gateway.networking.k8s.io/gateways/status":     {"get", "patch", "update"},
		"gateway.networking.k8s.io/httproutes/status":   {"get", "patch", "update"},
		"gateway.networking.k8s.io/tcproutes":           {"get", "list", "watch"},
		"gateway.networking.k8s.io/tcproutes/status":    {"get", "patch", "update"},
		"gateway.networking.k8s.io/gateways/finalizers": {"update"},
		"events.k8s.io/events":                          {"create", "patch"},
	}
	wantCtrlOwn := map[string][]string{
		"/secrets":                   {"create", "delete", "get", "patch"},
		"coordination.k8s.io/leases": {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/events":                    {"create", "patch"},
	}
	if got, want := ctrl.RoleNamespaces(), []string{"team-a", "team-b", release}; !slices.Equal(got, want) {
		t.Errorf("controller Roles in %v, want %v", got, want)
	}
	compareGrants(t, "controller Role team-a", grants(ctrl.RulesIn("team-a")), wantCtrlWatched)
	compareGrants(t, "controller Role team-b", grants(ctrl.RulesIn("team-b")), wantCtrlWatched)
	compareGrants(t, "controller Role "+release, grants(ctrl.NamespaceRules()), wantCtrlOwn)

	agent, err := r.RBAC(ComponentAgent)
	if err != nil {
		t.Fatal(err)
	}
	compareGrants(t, "agent ClusterRole", grants(agent.ClusterRules()), map[string][]string{
		"networking.k8s.io/ingressclasses":         {"get", "list", "watch"},
		"gateway.networking.k8s.io/gatewayclasses": {"get", "list", "watch"},
	})
	wantAgentWatched := map[string][]string{
		"k8s.tuna.am/tunnels":                          {"get", "list", "watch"},
		"k8s.tuna.am/accesspolicies":                   {"get"},
		"k8s.tuna.am/tunnels/status":                   {"get", "patch", "update"},
		"networking.k8s.io/ingresses":                  {"get", "list", "watch"},
		"networking.k8s.io/ingresses/status":           {"get", "patch", "update"},
		"gateway.networking.k8s.io/gateways":           {"get", "list", "watch"},
		"gateway.networking.k8s.io/httproutes":         {"get", "list", "watch"},
		"gateway.networking.k8s.io/referencegrants":    {"get", "list", "watch"},
		"gateway.networking.k8s.io/backendtlspolicies": {"get", "list", "watch"},
		"/services":                       {"get"},
		"/secrets":                        {"get"},
		"/configmaps":                     {"get"},
		"discovery.k8s.io/endpointslices": {"list", "watch"},
		"events.k8s.io/events":            {"create", "patch"},
	}
	if got, want := agent.RoleNamespaces(), []string{"team-a", "team-b", release}; !slices.Equal(got, want) {
		t.Errorf("agent Roles in %v, want %v", got, want)
	}
	compareGrants(t, "agent Role team-a", grants(agent.RulesIn("team-a")), wantAgentWatched)
	compareGrants(t, "agent Role team-b", grants(agent.RulesIn("team-b")), wantAgentWatched)
	compareGrants(t, "agent Role "+release, grants(agent.NamespaceRules()), map[string][]string{
		"/secrets": {"get"}, "coordination.k8s.io/leases": agentLeaseGrants["coordination.k8s.io/leases"]})

	// What the option is for, stated as RBAC would decide it.
	may := func(b *RBAC, ns, res, verb string) bool {
		return allows(b.ClusterRules(), "", res, verb, "x") || allows(b.RulesIn(ns), "", res, verb, "x")
	}
	for _, ns := range []string{"team-a", "team-b", release} {
		if !may(agent, ns, "secrets", "get") {
			t.Errorf("agent may not get Secrets in %s", ns)
		}
	}
	if may(agent, "elsewhere", "secrets", "get") || may(agent, "elsewhere", "services", "get") {
		t.Error("agent may get Secrets or Services in an unlisted namespace")
	}
	if may(agent, release, "services", "get") {
		t.Error("agent may get Services in the release namespace, which is not listed")
	}
	if allows(ctrl.RulesIn("team-a"), "", "secrets", "create", "x") {
		t.Error("controller may write Secrets in a watched namespace; only in its own")
	}
	for _, b := range []*RBAC{ctrl, agent} {
		for _, rb := range b.RoleBindings {
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != b.ServiceAccount.Name {
				t.Errorf("%s RoleBinding %s/%s binds %v", b.Component, rb.Namespace, rb.Name, rb.RoleRef)
			}
		}
		if len(b.Roles) != 3 || len(b.RoleBindings) != 3 {
			t.Errorf("%s: %d Roles and %d RoleBindings, want one each per namespace (3)", b.Component, len(b.Roles), len(b.RoleBindings))
		}
	}
}

// Listing the release namespace merges its rules into the one Role there:
// two Roles of the same name in one namespace could not both exist.
func TestRBACWatchReleaseNamespace(t *testing.T) {
	r := render(t, withKey(t, "watchNamespaces={team-a,"+DefaultNamespace+"}"))
	for _, comp := range []string{ComponentController, ComponentAgent} {
		b, err := r.RBAC(comp)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := b.RoleNamespaces(), []string{"team-a", DefaultNamespace}; !slices.Equal(got, want) || len(b.Roles) != 2 {
			t.Errorf("%s: Roles %d in %v, want one in each of %v", comp, len(b.Roles), got, want)
		}
		own := b.NamespaceRules()
		if !allows(own, "k8s.tuna.am", "tunnels", "watch", "") {
			t.Errorf("%s may not watch Tunnels in the listed release namespace", comp)
		}
		switch comp {
		case ComponentController:
			if !allows(own, "", "secrets", "patch", "x") || !allows(own, "coordination.k8s.io", "leases", "update", "x") {
				t.Error("controller lost its key Secret or lease rules in the listed release namespace")
			}
		case ComponentAgent:
			if !allows(own, "", "secrets", "get", "x") || !allows(own, "", "services", "get", "x") {
				t.Error("agent may not get Secrets and Services in the listed release namespace")
			}
			if !allows(own, "coordination.k8s.io", "leases", "update", "x") {
				t.Error("agent lost its heartbeat Lease rules in the listed release namespace")
			}
		}
	}
}

// agentLeaseGrants are the agent's rights on the heartbeat Leases of its
// replicas, in the release namespace: no list or watch.
var agentLeaseGrants = map[string][]string{"coordination.k8s.io/leases": {"create", "delete", "get", "update"}}
