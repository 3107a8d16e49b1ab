package preflight

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/chart"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// CatClusterID is the category of the cluster id check.
const CatClusterID = "cluster-id"

// retainKinds are the resources whose reservations reclaimPolicy Retain
// keeps on the edge.
var retainKinds = []string{"domains", "tcpendpoints"}

// clusterID warns when Domains or TCPEndpoints keep their reservations
// with reclaimPolicy Retain while the operator's cluster id is the UID of
// kube-system (clusterID ""): every reservation belongs to
// "<cluster-id>/<namespace>", and a rebuilt cluster has another
// kube-system, so it would find its retained addresses owned by the old,
// gone cluster.
func (p *run) clusterID(ctx context.Context, r *chart.Rendered) {
	if r == nil {
		return
	}
	const desc = "retained reservations survive a rebuild of the cluster"
	if id, _ := r.Values["clusterID"].(string); id != "" {
		p.rep.OK(CatClusterID, desc, fmt.Sprintf("clusterID=%s: a cluster installed with the same clusterID owns the same addresses", id))
		return
	}
	var retained []string
	for _, res := range retainKinds {
		list, err := p.c.Dynamic.Resource(tunav1.GroupVersion.WithResource(res)).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the CRDs are not installed yet: nothing is retained
		}
		if err != nil {
			p.rep.Warn(CatClusterID, desc, fmt.Sprintf("not checked: listing %s: %v", res, err),
				"the caller needs list on domains and tcpendpoints to check this; the install does not")
			return
		}
		for _, u := range list.Items {
			if policy, _, _ := unstructured.NestedString(u.Object, "spec", "reclaimPolicy"); policy == string(tunav1.ReclaimRetain) {
				retained = append(retained, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
			}
		}
	}
	if len(retained) == 0 {
		p.rep.OK(CatClusterID, desc, "no Domain or TCPEndpoint has reclaimPolicy Retain; clusterID is the UID of kube-system")
		return
	}
	p.rep.Warn(CatClusterID, desc,
		"reclaimPolicy Retain on "+strings.Join(retained, ", ")+", but clusterID is not set: the operator uses the UID of kube-system, "+
			"which a rebuilt cluster does not share, so it would find these addresses owned by the old cluster",
		"set clusterID to a name of your own that you will give the rebuilt cluster too (e.g. --set clusterID=prod-eu-1), "+
			"with an API key bound to it (tuna-edge keys create --owner-prefix); addresses already reserved under the kube-system UID "+
			"move to the new id with `tuna-edge owners transfer --from <old id> --to <new id>` on the edge")
}
