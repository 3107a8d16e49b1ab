package release

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/cli/pkg/cluster"
)

// Plan is what an install or upgrade would change.
type Plan struct {
	// Operation is "install" (no release yet) or "upgrade".
	Operation string `json:"operation"`
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Revision is the current revision (0 for an install).
	Revision int `json:"revision"`
	// CRDs are applied first; Resources are the release's objects.
	CRDs      []cluster.Change `json:"crds"`
	Resources []cluster.Change `json:"resources"`
}

// HasChanges reports whether applying the plan would change anything.
func (p *Plan) HasChanges() bool {
	return cluster.HasChanges(p.CRDs) || cluster.HasChanges(p.Resources)
}

// HasErrors reports whether the install or upgrade would fail.
func (p *Plan) HasErrors() bool {
	return cluster.HasErrors(p.CRDs) || cluster.HasErrors(p.Resources)
}

// Counts returns how many changes of each action the plan has.
func (p *Plan) Counts() map[string]int {
	out := map[string]int{}
	for _, cs := range [][]cluster.Change{p.CRDs, p.Resources} {
		for _, c := range cs {
			out[c.Action]++
		}
	}
	return out
}

// Plan computes what `install` (when the release does not exist) or
// `upgrade` with the same options would change, from a server-side dry
// run of every object: CRDs first, then the release's objects; objects of
// the current release that the new render drops are deletions.
func (m *Manager) Plan(ctx context.Context, o Options) (*Plan, error) {
	o.defaults()
	cfg, err := m.helm(o.Namespace, o)
	if err != nil {
		return nil, err
	}
	cur, err := current(cfg, o.Release)
	if err != nil {
		return nil, err
	}
	p := &Plan{Operation: "install", Release: o.Release, Namespace: o.Namespace}
	vals := o.Values
	var previous []*unstructured.Unstructured
	if cur != nil {
		p.Operation, p.Revision = "upgrade", cur.Version
		vals = effectiveValues(o, cur)
		if previous, err = cluster.DecodeYAML([]byte(cur.Manifest)); err != nil {
			return nil, fmt.Errorf("reading the manifest of release %s revision %d: %w", cur.Name, cur.Version, err)
		}
	}
	r, err := m.render(ctx, o, vals, cur != nil)
	if err != nil {
		return nil, err
	}

	crds, err := o.crds()
	if err != nil {
		return nil, err
	}
	states, err := m.C.CompareCRDs(ctx, crds)
	if err != nil {
		return nil, err
	}
	for i, st := range states {
		ch := cluster.Change{APIVersion: crds[i].GetAPIVersion(), Kind: crds[i].GetKind(), Name: st.Name, Summary: st.Changes}
		switch st.State {
		case "missing":
			ch.Action = cluster.ActionCreate
		case "stale":
			ch.Action = cluster.ActionUpdate
		default:
			ch.Action = cluster.ActionUnchanged
		}
		p.CRDs = append(p.CRDs, ch)
	}

	var wanted []*unstructured.Unstructured
	for _, mf := range r.Manifests {
		obj := mf.Object.DeepCopy()
		cluster.SetHelmMetadata(obj, o.Release, o.Namespace)
		wanted = append(wanted, obj)
	}
	if p.Resources, err = m.C.PlanObjects(ctx, wanted, previous, o.Namespace, o.Release); err != nil {
		return nil, err
	}
	return p, nil
}
