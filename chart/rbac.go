package chart

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RBAC is what one component of the rendered chart runs as: its
// ServiceAccount and the roles bound to it.
type RBAC struct {
	Component           string
	ServiceAccount      corev1.ServiceAccount
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

// RBAC returns the ServiceAccount, ClusterRoles, Roles and bindings of one
// component (ComponentController or ComponentAgent), picked by the
// app.kubernetes.io/component label. Every binding must name that
// component's ServiceAccount, and every role bound must be rendered too.
func (r *Rendered) RBAC(component string) (*RBAC, error) {
	out := &RBAC{Component: component}
	sas := 0
	for _, m := range r.Component(component) {
		var err error
		switch m.Kind() {
		case "ServiceAccount":
			sas++
			err = m.Into(&out.ServiceAccount)
		case "ClusterRole":
			var o rbacv1.ClusterRole
			err = m.Into(&o)
			out.ClusterRoles = append(out.ClusterRoles, o)
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			err = m.Into(&o)
			out.ClusterRoleBindings = append(out.ClusterRoleBindings, o)
		case "Role":
			var o rbacv1.Role
			err = m.Into(&o)
			out.Roles = append(out.Roles, o)
		case "RoleBinding":
			var o rbacv1.RoleBinding
			err = m.Into(&o)
			out.RoleBindings = append(out.RoleBindings, o)
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", m.Kind(), m.Name(), err)
		}
	}
	if sas != 1 {
		return nil, fmt.Errorf("component %q: %d ServiceAccounts in the rendered chart, want 1: %w", component, sas, ErrNotFound)
	}
	sa := out.ServiceAccount
	check := func(kind, name, namespace string, roleRef rbacv1.RoleRef, subjects []rbacv1.Subject) error {
		if len(subjects) != 1 || subjects[0].Kind != rbacv1.ServiceAccountKind ||
			subjects[0].Name != sa.Name || subjects[0].Namespace != sa.Namespace {
			return fmt.Errorf("%s %s does not bind exactly ServiceAccount %s/%s: %+v", kind, name, sa.Namespace, sa.Name, subjects)
		}
		found := false
		switch roleRef.Kind {
		case "ClusterRole":
			for _, cr := range out.ClusterRoles {
				found = found || cr.Name == roleRef.Name
			}
		case "Role":
			// A RoleBinding can only bind a Role of its own namespace.
			for _, ro := range out.Roles {
				found = found || (ro.Name == roleRef.Name && ro.Namespace == namespace)
			}
		}
		if !found {
			return fmt.Errorf("%s %s binds %s %s, which the chart does not render for %s in its namespace: %w", kind, name, roleRef.Kind, roleRef.Name, component, ErrNotFound)
		}
		return nil
	}
	for _, b := range out.ClusterRoleBindings {
		if err := check("ClusterRoleBinding", b.Name, "", b.RoleRef, b.Subjects); err != nil {
			return nil, err
		}
	}
	for _, b := range out.RoleBindings {
		if b.RoleRef.Kind == "ClusterRole" {
			return nil, fmt.Errorf("RoleBinding %s binds a ClusterRole; the chart binds Roles only", b.Name)
		}
		if err := check("RoleBinding", b.Name, b.Namespace, b.RoleRef, b.Subjects); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Username is the name the component's pods authenticate as, the user to
// impersonate: system:serviceaccount:<namespace>:<name>.
func (b *RBAC) Username() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", b.ServiceAccount.Namespace, b.ServiceAccount.Name)
}

// Groups are the groups a ServiceAccount's token carries, for impersonation.
func (b *RBAC) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + b.ServiceAccount.Namespace, "system:authenticated"}
}

// Objects returns copies of all objects, ServiceAccount first, ready to be
// created with a controller-runtime client (the release namespace and
// those of watchNamespaces must exist).
func (b *RBAC) Objects() []client.Object {
	out := []client.Object{b.ServiceAccount.DeepCopy()}
	for i := range b.ClusterRoles {
		out = append(out, b.ClusterRoles[i].DeepCopy())
	}
	for i := range b.ClusterRoleBindings {
		out = append(out, b.ClusterRoleBindings[i].DeepCopy())
	}
	for i := range b.Roles {
		out = append(out, b.Roles[i].DeepCopy())
	}
	for i := range b.RoleBindings {
		out = append(out, b.RoleBindings[i].DeepCopy())
	}
	return out
}

// ClusterRules are the rules of all the component's ClusterRoles.
func (b *RBAC) ClusterRules() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, cr := range b.ClusterRoles {
		out = append(out, cr.Rules...)
	}
	return out
}

// NamespaceRules are the rules of the component's Roles in the release
// namespace (the ServiceAccount's).
func (b *RBAC) NamespaceRules() []rbacv1.PolicyRule {
	return b.RulesIn(b.ServiceAccount.Namespace)
}

// RulesIn are the rules of the component's Roles in namespace. What the
// component may do there is these and its ClusterRules.
func (b *RBAC) RulesIn(namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, ro := range b.Roles {
		if ro.Namespace == namespace {
			out = append(out, ro.Rules...)
		}
	}
	return out
}

// RoleNamespaces are the namespaces the component has Roles in, sorted.
func (b *RBAC) RoleNamespaces() []string {
	var out []string
	for _, ro := range b.Roles {
		out = append(out, ro.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
