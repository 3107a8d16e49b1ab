package preflight

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
)

// CatAccess is the category of the AccessPolicy checks.
const CatAccess = "access-policies"

// accessPolicies checks the AccessPolicies already in the cluster: every
// Secret they name is there with its key (a missing one leaves the policy
// out of force, and the addresses it guards refuse every request), and
// each is Accepted by the edge.
func (p *run) accessPolicies(ctx context.Context) {
	items, installed, err := p.c.List(ctx, cluster.AccessPolicies, "")
	desc := "the Secrets of the AccessPolicies exist"
	switch {
	case err != nil:
		p.rep.Warn(CatAccess, desc, "not checked: "+err.Error(), "the caller needs list on accesspolicies")
		return
	case !installed || len(items) == 0:
		p.rep.OK(CatAccess, desc, "no AccessPolicy yet")
		return
	}
	var missing, refused []string
	for i := range items {
		ap := &items[i]
		for _, ref := range secretRefs(ap) {
			s, err := p.c.Kube.CoreV1().Secrets(ap.GetNamespace()).Get(ctx, ref.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				missing = append(missing, fmt.Sprintf("%s/%s needs Secret %s (key %s)", ap.GetNamespace(), ap.GetName(), ref.name, ref.key))
			case apierrors.IsForbidden(err):
				p.rep.Warn(CatAccess, desc, "not checked: the caller may not get Secrets in "+ap.GetNamespace(), "")
				return
			case err != nil:
				p.rep.Warn(CatAccess, desc, "not checked: "+err.Error(), "")
				return
			case len(s.Data[ref.key]) == 0:
				missing = append(missing, fmt.Sprintf("%s/%s needs the key %s in Secret %s", ap.GetNamespace(), ap.GetName(), ref.key, ref.name))
			}
		}
		if st, reason, msg := accepted(ap); st == "False" {
			refused = append(refused, fmt.Sprintf("%s/%s (%s: %s)", ap.GetNamespace(), ap.GetName(), reason, msg))
		}
	}
	if len(missing) > 0 {
		p.rep.Fail(CatAccess, desc, strings.Join(missing, "; "),
			"create them (kubectl create secret generic NAME --from-literal=KEY=...): until then the edge refuses every request to the addresses these policies guard")
	} else {
		p.rep.OK(CatAccess, desc, fmt.Sprintf("%d AccessPolicies", len(items)))
	}
	if len(refused) > 0 {
		p.rep.Warn(CatAccess, "the edge accepted every AccessPolicy", strings.Join(refused, "; "), "fix what the message says; `kubectl describe accesspolicy` has the details")
	} else {
		p.rep.OK(CatAccess, "the edge accepted every AccessPolicy", "")
	}
}

type secretRef struct{ name, key string }

// secretRefs are the Secrets an AccessPolicy's rules name, with their
// keys (defaults as the operator applies them).
func secretRefs(ap *unstructured.Unstructured) []secretRef {
	rules, _, _ := unstructured.NestedSlice(ap.Object, "spec", "rules")
	var out []secretRef
	for _, r := range rules {
		m, _ := r.(map[string]any)
		for _, f := range []struct {
			path []string
			def  string
		}{
			{[]string{"oidc", "clientSecretRef"}, "client-secret"},
			{[]string{"basicAuth", "secretRef"}, "htpasswd"},
			{[]string{"links", "secretRef"}, "key"},
		} {
			name, _, _ := unstructured.NestedString(m, append(f.path, "name")...)
			if name == "" {
				continue
			}
			key, _, _ := unstructured.NestedString(m, append(f.path, "key")...)
			if key == "" {
				key = f.def
			}
			out = append(out, secretRef{name, key})
		}
	}
	return out
}

func accepted(ap *unstructured.Unstructured) (status, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(ap.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Accepted" {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			msg, _ = m["message"].(string)
		}
	}
	return status, reason, msg
}

// accessSupport checks that the edge enforces access policies (an edge
// older than them has no /v1/access routes).
func (p *run) accessSupport(ctx context.Context, cl *edgeclient.Client) {
	const desc = "the edge enforces access policies"
	if _, err := cl.AccessJWKS(ctx); err != nil {
		if apiwire.IsNotFound(err) {
			p.rep.Warn(CatEdge, desc, "the edge has no /v1/access routes: it predates access policies",
				"upgrade tuna-edge before attaching AccessPolicies: an older edge refuses binds that name one")
			return
		}
		p.rep.Warn(CatEdge, desc, "not checked: "+err.Error(), "")
		return
	}
	p.rep.OK(CatEdge, desc, "its assertion keys are published at /v1/access/jwks")
}
