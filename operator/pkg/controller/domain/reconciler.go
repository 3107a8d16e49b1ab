// Package domain reconciles Domain resources with reservations on the edge:
// a subdomain of the edge's base domain, or a custom domain whose DNS
// records the operator lists and re-verifies until they check out.
package domain

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/base"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/reservation"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Reconciler keeps a Domain's reservation on the edge.
type Reconciler struct {
	Client client.Client
	// Reader reads uncached, to decide adoption on fresh status.
	Reader   client.Reader
	Edge     edgeapi.Reservations
	Info     *edgeapi.InfoCache
	Recorder recorder.EventRecorder
	// ClusterID makes the owner of every reservation: "<cluster-id>/<namespace>".
	ClusterID string
	// VerifyInterval re-runs a failed DNS check (default 5 minutes).
	VerifyInterval time.Duration
	// Resync re-reads the reservation to notice one deleted on the edge.
	Resync time.Duration

	held reservation.Ledger
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("domain").For(&tunav1.Domain{}).Complete(&base.Reconciler[*tunav1.Domain]{
		Client: r.Client, New: func() *tunav1.Domain { return &tunav1.Domain{} },
		Finalizer: tunav1.FinalizerReservation, Finalize: r.finalize, Converge: r.converge, Gone: r.gone,
	})
}

// converge keeps one Domain's reservation, verification and status.
func (r *Reconciler) converge(ctx context.Context, d *tunav1.Domain) (reconcile.Result, error) {
	fqdn, err := r.fqdn(ctx, d)
	if err != nil {
		return r.failed(ctx, d, err)
	}

	res, adopted, err := r.ensure(ctx, d, fqdn)
	if err != nil {
		return r.failed(ctx, d, err)
	}
	r.held.Hold(client.ObjectKeyFromObject(d), reservation.Held{UID: d.UID, Address: res.Name,
		Release: reservation.Release(adopted, d.Spec.ReclaimPolicy)})
	if want := accessPolicy(d); res.AccessPolicy != want {
		// The edge enforces it on the domain whoever binds it; an
		// unowned (adopted) reservation takes none, and says so.
		if res, err = r.Edge.SetDomainAccessPolicy(ctx, fqdn, edgeapi.Owner(r.ClusterID, d.Namespace), want); err != nil {
			return r.failed(ctx, d, err)
		}
	}
	noDNS, err := r.dnsDisabled(ctx, res)
	if err != nil {
		return r.failed(ctx, d, err)
	}
	if res.Custom && !res.Verified && !noDNS && r.verifyDue(d) {
		if res, err = r.Edge.VerifyDomain(ctx, fqdn, edgeapi.Owner(r.ClusterID, d.Namespace)); err != nil {
			return r.failed(ctx, d, err)
		}
		now := metav1.Now()
		d.Status.LastVerifiedTime = &now
	}
	return r.report(ctx, d, res, adopted, noDNS)
}

// accessPolicy is the name of the AccessPolicy the Domain attaches, or "".
func accessPolicy(d *tunav1.Domain) string {
	if ref := d.Spec.AccessPolicyRef; ref != nil {
		return ref.Name
	}
	return ""
}

// fqdn is the full name the Domain asks for.
func (r *Reconciler) fqdn(ctx context.Context, d *tunav1.Domain) (string, error) {
	if d.Spec.Domain != "" {
		return d.Spec.Domain, nil
	}
	info, err := r.Info.Get(ctx)
	if err != nil {
		return "", err
	}
	return d.Spec.Subdomain + "." + info.BaseDomain, nil
}

// ensure finds or makes the reservation (reservation.Ensure): the
// Domain's status recorded it when status.fqdn names it.
func (r *Reconciler) ensure(ctx context.Context, d *tunav1.Domain, fqdn string) (*apiwire.Domain, bool, error) {
	owner := edgeapi.Owner(r.ClusterID, d.Namespace)
	shared := edgeapi.Owners(r.ClusterID, d.Spec.SharedWith)
	return reservation.Ensure(ctx, r.Reader, r.Recorder, d, reservation.Ensuring[*tunav1.Domain, apiwire.Domain]{
		Address: fqdn, What: "domain " + fqdn, Owner: owner, SharedWith: shared,
		Recorded: func(x *tunav1.Domain) bool { return x.Status.FQDN == fqdn },
		Adopted:  func(x *tunav1.Domain) bool { return x.Status.Adopted },
		Get:      r.Edge.GetDomain,
		Create: func(ctx context.Context) (*apiwire.Domain, error) {
			return r.Edge.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: d.Spec.Subdomain, Domain: d.Spec.Domain,
				Sharing: apiwire.Sharing{Owner: owner, SharedWith: shared}})
		},
		Sharing: func(x *apiwire.Domain) apiwire.Sharing { return x.Sharing },
		Share:   r.Edge.ShareDomain,
	})
}

func (r *Reconciler) verifyDue(d *tunav1.Domain) bool {
	last := d.Status.LastVerifiedTime
	return last == nil || time.Since(last.Time) >= r.verifyInterval()
}

func (r *Reconciler) verifyInterval() time.Duration {
	if r.VerifyInterval > 0 {
		return r.VerifyInterval
	}
	return 5 * time.Minute
}

// dnsDisabled reports whether res is a custom domain that can never be
// verified, because the edge checks no DNS.
func (r *Reconciler) dnsDisabled(ctx context.Context, res *apiwire.Domain) (bool, error) {
	if !res.Custom || res.Verified {
		return false, nil
	}
	info, err := r.Info.Get(ctx)
	if err != nil {
		return false, err
	}
	return info.DNSVerificationDisabled, nil
}

// report writes status and decides when to look again.
func (r *Reconciler) report(ctx context.Context, d *tunav1.Domain, res *apiwire.Domain, adopted, noDNS bool) (reconcile.Result, error) {
	records := make([]any, 0, len(res.DNSRecords))
	for _, rec := range res.DNSRecords {
		records = append(records, map[string]any{"type": rec.Type, "name": rec.Name, "value": rec.Value})
	}
	var cond metav1.Condition
	next := reservation.Resync(r.Resync)
	switch {
	case res.Verified && adopted:
		cond = status.Condition(d.Status.Conditions, tunav1.ConditionReady, metav1.ConditionTrue, tunav1.ReasonAdopted,
			fmt.Sprintf("%s already existed on the account and is adopted; the operator will never delete it", res.Name), d.Generation)
	case res.Verified:
		cond = status.Condition(d.Status.Conditions, tunav1.ConditionReady, metav1.ConditionTrue, tunav1.ReasonReserved,
			fmt.Sprintf("%s is reserved", res.Name), d.Generation)
	case noDNS:
		// Waiting for records would be waiting for ever.
		cond = status.Condition(d.Status.Conditions, tunav1.ConditionReady, metav1.ConditionFalse, tunav1.ReasonDNSVerificationDisabled,
			fmt.Sprintf("%s is reserved, but the edge checks no DNS (it runs with an empty --dns-resolver), so it can never be "+
				"verified nor served there: ask the edge's administrator to set --dns-resolver (system, or a resolver's host:port), "+
				"or use a subdomain of the edge (spec.subdomain)", res.Name), d.Generation)
	default:
		msg := fmt.Sprintf("create the DNS records in status.dnsRecords at your DNS provider; the operator re-checks every %s", r.verifyInterval())
		if res.VerifyError != "" {
			msg += "; last check: " + res.VerifyError
		}
		cond = status.Condition(d.Status.Conditions, tunav1.ConditionReady, metav1.ConditionFalse, tunav1.ReasonDNSPending, msg, d.Generation)
		if last := d.Status.LastVerifiedTime; last != nil {
			if wait := time.Until(last.Add(r.verifyInterval())); wait < next {
				next = max(wait, time.Second)
			}
		}
	}
	values := map[string]any{
		"fqdn": res.Name, "adopted": adopted, "verified": res.Verified, "dnsRecords": records,
		"observedGeneration": d.Generation,
	}
	if d.Status.LastVerifiedTime != nil {
		values["lastVerifiedTime"] = d.Status.LastVerifiedTime.UTC().Format(time.RFC3339)
	}
	if err := reservation.WriteStatus(ctx, r.Client, r.Recorder, d, "Domain", d.Status.Conditions, cond, values); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: next}, nil
}

// failed records an edge failure on Ready and picks the retry.
func (r *Reconciler) failed(ctx context.Context, d *tunav1.Domain, err error) (reconcile.Result, error) {
	return reservation.Failed(ctx, r.Client, r.Recorder, d, "Domain", d.Status.Conditions, d.Generation, r.ClusterID, reservation.Resync(r.Resync), err)
}

// finalize releases the reservation unless it is adopted, retained, or
// another owner's (reservation.Finalize).
func (r *Reconciler) finalize(ctx context.Context, d *tunav1.Domain) (reconcile.Result, error) {
	d, err := reservation.Fresh(ctx, r.Reader, d)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	fqdn, release := d.Status.FQDN, reservation.Release(d.Status.Adopted, d.Spec.ReclaimPolicy)
	if h, ok := r.held.Lookup(client.ObjectKeyFromObject(d), d.UID); ok && fqdn == "" {
		// Reserved, but the status write did not land before the delete.
		fqdn, release = h.Address, h.Release
	}
	what := fqdn
	if what == "" {
		// Never reserved (refused, say): name what it asked for.
		if what, err = r.fqdn(ctx, d); err != nil {
			what = d.Spec.Subdomain
		}
	}
	res, err := reservation.Finalize(ctx, r.Client, r.Recorder, d, d.Status.Conditions, d.Generation, reservation.Releasing{
		Kind: "Domain", What: "domain " + what, Address: fqdn, ClusterID: r.ClusterID, Release: release,
		Recheck: reservation.Resync(r.Resync), Delete: r.Edge.DeleteDomain,
	})
	if err == nil && res.IsZero() {
		r.held.Forget(client.ObjectKeyFromObject(d))
		reservation.Forget(client.ObjectKeyFromObject(d))
	}
	return res, err
}

// gone releases the reservation of a Domain that went without its
// finalizer, as the finalizer would have, unless a Domain of the namespace
// (read live) holds or asks for the name.
func (r *Reconciler) gone(ctx context.Context, key types.NamespacedName) error {
	reservation.Forget(key)
	return r.held.Gone(ctx, key, "Domain", func(ctx context.Context, h reservation.Held) (bool, error) {
		var list tunav1.DomainList
		if err := r.Reader.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
			return false, err
		}
		for i := range list.Items {
			d := &list.Items[i]
			if d.UID == h.UID || d.Status.FQDN == h.Address {
				return true, nil
			}
			if want, err := r.fqdn(ctx, d); err != nil || want == h.Address {
				return true, err
			}
		}
		return false, nil
	}, func(ctx context.Context, address string) error {
		return r.Edge.DeleteDomain(ctx, address, edgeapi.Owner(r.ClusterID, key.Namespace))
	})
}
