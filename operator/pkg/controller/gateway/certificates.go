package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// certificateRetry is how soon a host whose certificate could not be set
// yet, because nobody holds the host on the edge (its tunnel key is being
// issued), is looked at again.
const certificateRetry = 2 * time.Second

// hostCertificates hands the edge the certificates of HTTPS listeners: for
// each host, the certificate of the namespace that holds the host on the
// edge (its Domain's, or the first publisher's on an edge that takes any
// host), from its oldest Gateway's first HTTPS listener for the host. It
// removes the certificates this process set for hosts no listener claims
// any more, and marks not programmed each listener whose certificate is
// not the one served, saying why. soon: a host is not held by anyone yet.
//
// An edge without a public HTTPS listener (https off) is handed nothing.
func (r *Reconciler) hostCertificates(ctx context.Context, gws []*gwv1.Gateway, evaluated model.Gateways, https bool) (soon bool, err error) {
	if r.Certificates == nil || !https {
		return false, nil
	}
	claims := model.CertificateClaims(gws, evaluated)
	for _, host := range r.Certificates.Hosts() {
		if len(usable(claims[host])) == 0 {
			if err := r.Certificates.Remove(ctx, host); err != nil {
				return false, fmt.Errorf("removing the certificate of host %s from the edge: %w", host, err)
			}
		}
	}
	hosts := make([]string, 0, len(claims))
	for h := range claims {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	var firstErr error
	for _, host := range hosts {
		served, problem, wait, err := r.setHostCertificate(ctx, host, claims[host])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		soon = soon || wait
		for _, c := range claims[host] {
			msg := ""
			switch {
			case c.Cert == nil:
				msg = fmt.Sprintf("no certificate of its certificateRefs is for host %s (a client would refuse it), so the edge is not given one: the host answers HTTPS with the edge's own certificate", host)
			case problem != "":
				msg = problem
			case served == nil:
				continue // the host is not held yet: look again soon
			case !bytes.Equal(served.Cert.CertPEM, c.Cert.CertPEM) || !bytes.Equal(served.Cert.KeyPEM, c.Cert.KeyPEM):
				msg = fmt.Sprintf("host %s is served with the certificate of Gateway %s (listener %s), not this listener's: the edge serves one certificate per host, that of the oldest Gateway of the namespace that holds the host",
					host, served.Gateway, served.Listener)
			}
			if msg != "" {
				notProgrammed(evaluated, c, msg)
			}
		}
	}
	return soon, firstErr
}

// usable are the claims with a certificate for their host.
func usable(claims []model.CertificateClaim) []model.CertificateClaim {
	var out []model.CertificateClaim
	for _, c := range claims {
		if c.Cert != nil {
			out = append(out, c)
		}
	}
	return out
}

// setHostCertificate sets host's certificate from the claim of the
// namespace that holds it. served is the claim whose certificate the edge
// serves (nil: none); problem says why no claim's is (the host is
// another's); wait: nobody holds the host yet. An error is the edge's
// failure to answer: what it serves stays as it is.
func (r *Reconciler) setHostCertificate(ctx context.Context, host string, claims []model.CertificateClaim) (served *model.CertificateClaim, problem string, wait bool, err error) {
	cands := usable(claims)
	if len(cands) == 0 {
		return nil, "", false, nil
	}
	owner := func(c model.CertificateClaim) string { return edgeapi.Owner(r.ClusterID, c.Namespace) }
	byOwner := func(o string) *model.CertificateClaim {
		for i := range cands {
			if owner(cands[i]) == o {
				return &cands[i]
			}
		}
		return nil
	}
	// The namespace that held the host when this process last set its
	// certificate is tried first: the holder rarely changes.
	first := &cands[0]
	if prev := r.Certificates.Owner(host); prev != "" {
		if c := byOwner(prev); c != nil {
			first = c
		} else if err := r.Certificates.Remove(ctx, host); err != nil {
			return nil, "", false, fmt.Errorf("removing the certificate of host %s from the edge: %w", host, err)
		}
	}
	put := func(c *model.CertificateClaim) error {
		return r.Certificates.Put(ctx, host, owner(*c), c.Cert.CertPEM, c.Cert.KeyPEM)
	}
	err = put(first)
	var ae *apiwire.APIError
	if errors.As(err, &ae) && ae.Code == apiwire.CodeAddressOwned {
		holder := byOwner(ae.Owner)
		if holder == nil {
			return nil, fmt.Sprintf("its certificate is not served: host %s is held on the edge by %s, and only the holder of a host sets its certificate (an HTTPS listener of a Gateway in that namespace); the host answers HTTPS with the holder's certificate or the edge's own",
				host, r.describeOwner(ae.Owner)), false, nil
		}
		first, err = holder, put(holder)
	}
	switch {
	case err == nil:
		return first, "", false, nil
	case apiwire.IsNotFound(err):
		return nil, "", true, nil
	}
	if f := edgeapi.Classify(err, ""); f.Transient {
		return nil, "", false, fmt.Errorf("setting the certificate of host %s on the edge: %w", host, err)
	}
	return nil, fmt.Sprintf("the edge refused the certificate for host %s: %s; the host answers HTTPS with the edge's own certificate", host, edgeapi.Message(err)), false, nil
}

// describeOwner names an owner on the edge for a user of this cluster.
func (r *Reconciler) describeOwner(owner string) string {
	if ns, ok := strings.CutPrefix(owner, r.ClusterID+"/"); ok {
		return "namespace " + ns
	}
	return "owner " + owner + " (not this cluster)"
}

// notProgrammed marks claim's listener not programmed with msg.
func notProgrammed(evaluated model.Gateways, c model.CertificateClaim, msg string) {
	ev := evaluated[c.Gateway]
	for i := range ev.Listeners {
		if ev.Listeners[i].Name == c.Listener {
			ev.Listeners[i].NotProgrammed(ev.Gateway.Generation, msg)
		}
	}
}
