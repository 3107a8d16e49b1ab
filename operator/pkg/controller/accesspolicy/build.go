// Package accesspolicy keeps each AccessPolicy on the edge: it turns the
// spec into the edge's policy, reading the Secrets it names (get only,
// in the policy's namespace), writes it when its digest changed, deletes it
// with the AccessPolicy, and reports in status which addresses of the
// namespace it guards, with events on the resources that attach it.
package accesspolicy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// Default keys of the Secrets the rules name.
const (
	DefaultClientSecretKey = "client-secret"
	DefaultHtpasswdKey     = "htpasswd"
	DefaultLinksKey        = "key"
)

// SecretError is a Secret, or a key of one, that a policy names and that
// is not there.
type SecretError struct{ Msg string }

func (e *SecretError) Error() string { return e.Msg }

// Build turns an AccessPolicy into the edge's policy for owner, reading
// the Secrets it names with get.
func Build(ctx context.Context, r client.Reader, p *tunav1.AccessPolicy, owner string) (apiwire.AccessPolicy, error) {
	s := p.Spec
	out := apiwire.AccessPolicy{Name: p.Name, Owner: owner, Maintenance: s.Maintenance, DenyPage: s.DenyPage,
		MaintenancePage: s.MaintenancePage, NoIdentityHeaders: s.IdentityHeaders != nil && !*s.IdentityHeaders}
	if s.SessionLifetime != nil {
		out.SessionLifetimeSeconds = int64(s.SessionLifetime.Duration / time.Second)
	}
	if rl := s.RateLimits; rl != nil {
		out.RateLimits = &apiwire.AccessRateLimits{PerClientIP: rateLimit(rl.PerClientIP), PerIdentity: rateLimit(rl.PerIdentity)}
	}
	out.RequestHeaders = edits(s.RequestHeaders)
	out.ResponseHeaders = edits(s.ResponseHeaders)
	read := func(ref tunav1.SecretKeySelector, def, what string) (string, error) {
		key := ref.Key
		if key == "" {
			key = def
		}
		var sec corev1.Secret
		if err := r.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, &sec); err != nil {
			if apierrors.IsNotFound(err) {
				return "", &SecretError{fmt.Sprintf("the Secret %s of %s does not exist in namespace %s: create it with the key %s", ref.Name, what, p.Namespace, key)}
			}
			return "", fmt.Errorf("reading Secret %s/%s: %w", p.Namespace, ref.Name, err)
		}
		v, ok := sec.Data[key]
		if !ok || len(v) == 0 {
			return "", &SecretError{fmt.Sprintf("the Secret %s of %s has no key %s", ref.Name, what, key)}
		}
		return string(v), nil
	}
	for i, ru := range s.Rules {
		what := fmt.Sprintf("rule %d", i+1)
		if ru.Name != "" {
			what = fmt.Sprintf("rule %s", ru.Name)
		}
		er := apiwire.AccessRule{Name: ru.Name, PathPrefixes: ru.PathPrefixes, Methods: ru.Methods, Public: ru.Public, Deny: ru.Deny}
		switch {
		case ru.IP != nil:
			er.IP = &apiwire.IPRule{AllowCIDRs: ru.IP.AllowCIDRs, DenyCIDRs: ru.IP.DenyCIDRs}
		case ru.OIDC != nil:
			o := ru.OIDC
			secret, err := read(o.ClientSecretRef, DefaultClientSecretKey, what+" (oidc.clientSecretRef)")
			if err != nil {
				return out, err
			}
			er.OIDC = &apiwire.OIDCRule{IssuerURL: o.IssuerURL, ClientID: o.ClientID, ClientSecret: secret, Scopes: o.Scopes,
				GroupsClaim: o.GroupsClaim, AllowedEmails: o.AllowedEmails, AllowedDomains: o.AllowedDomains, AllowedGroups: o.AllowedGroups}
			for _, c := range o.AllowedClaims {
				er.OIDC.AllowedClaims = append(er.OIDC.AllowedClaims, apiwire.ClaimMatch{Name: c.Name, Values: c.Values})
			}
		case ru.BasicAuth != nil:
			file, err := read(ru.BasicAuth.SecretRef, DefaultHtpasswdKey, what+" (basicAuth.secretRef)")
			if err != nil {
				return out, err
			}
			er.BasicAuth = &apiwire.BasicAuthRule{Htpasswd: file, Realm: ru.BasicAuth.Realm}
		case ru.Links != nil:
			key, err := read(ru.Links.SecretRef, DefaultLinksKey, what+" (links.secretRef)")
			if err != nil {
				return out, err
			}
			er.Links = &apiwire.LinksRule{Key: key}
		}
		out.Rules = append(out.Rules, er)
	}
	return out, nil
}

func rateLimit(in *tunav1.RateLimit) *apiwire.RequestRate {
	if in == nil {
		return nil
	}
	return &apiwire.RequestRate{Requests: int(in.Requests), PeriodSeconds: max(int64(in.Period.Duration/time.Second), 1)}
}

func edits(in *tunav1.HeaderEdits) *apiwire.HeaderEdits {
	if in == nil {
		return nil
	}
	return &apiwire.HeaderEdits{Set: in.Set, Remove: in.Remove}
}
