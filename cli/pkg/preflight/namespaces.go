package preflight

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/chart"
)

// CatNamespaces is the category of the watchNamespaces check.
const CatNamespaces = "namespaces"

// watchNamespaces checks that every namespace of watchNamespaces exists.
// The chart puts a Role and a RoleBinding in each, and the API server
// refuses them in a missing namespace, so the install would fail halfway:
// a failed check, not a warning.
func (p *run) watchNamespaces(ctx context.Context, r *chart.Rendered) {
	if r == nil {
		return
	}
	listed := watchNamespacesOf(r.Values)
	desc := "the namespaces of watchNamespaces exist"
	if len(listed) == 0 {
		p.rep.OK(CatNamespaces, desc, "watchNamespaces is empty: the operator serves every namespace")
		return
	}
	var missing []string
	for _, ns := range listed {
		_, err := p.c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, ns)
		case err != nil:
			p.rep.Warn(CatNamespaces, desc, fmt.Sprintf("not checked: reading namespace %s: %v", ns, err),
				"the caller needs get on namespaces to check this; the install fails if one is missing")
			return
		}
	}
	if len(missing) > 0 {
		p.rep.Fail(CatNamespaces, desc, "missing: "+strings.Join(missing, ", "),
			"create them first (kubectl create namespace "+strings.Join(missing, " ")+
				"): the chart puts the operator's Roles there; or remove them from watchNamespaces")
		return
	}
	p.rep.OK(CatNamespaces, desc, strings.Join(listed, ", "))
}

// watchNamespacesOf returns the watchNamespaces of merged chart values.
func watchNamespacesOf(values map[string]any) []string {
	list, _ := values["watchNamespaces"].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}
