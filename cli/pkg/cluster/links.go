package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
)

// LinkRequest is a shareable link to make.
type LinkRequest struct {
	Namespace, Policy string
	// Host the link opens; empty: the policy's one address, if it guards
	// exactly one.
	Host    string
	Path    string
	Expires time.Duration
	Uses    int
	// Scheme of the URL (https, or http for an edge without TLS).
	Scheme string
	Now    time.Time
}

// LinkError is a link that cannot be made as asked; the message says what
// to change.
type LinkError struct{ Msg string }

func (e *LinkError) Error() string { return e.Msg }

// MakeLink signs a shareable link of an AccessPolicy with the key of its
// links rule's Secret, read with the caller's credentials: whoever may
// read that Secret may make links. It returns the URL and the link.
func (c *Cluster) MakeLink(ctx context.Context, req LinkRequest) (string, link.Link, error) {
	p, err := c.Dynamic.Resource(AccessPolicies.GVR()).Namespace(req.Namespace).Get(ctx, req.Policy, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", link.Link{}, &LinkError{fmt.Sprintf("AccessPolicy %s/%s does not exist", req.Namespace, req.Policy)}
	}
	if err != nil {
		return "", link.Link{}, fmt.Errorf("reading AccessPolicy %s/%s: %w", req.Namespace, req.Policy, err)
	}
	secret, key, err := linksSecret(p)
	if err != nil {
		return "", link.Link{}, err
	}
	host := req.Host
	if host == "" {
		addrs := strings.Split(guarded(p), ",")
		if len(addrs) != 1 || addrs[0] == "-" || strings.HasPrefix(addrs[0], "tcp://") {
			return "", link.Link{}, &LinkError{fmt.Sprintf("AccessPolicy %s guards %s: name the host with --host", req.Policy, guarded(p))}
		}
		host = addrs[0]
	}
	s, err := c.Kube.CoreV1().Secrets(req.Namespace).Get(ctx, secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", link.Link{}, &LinkError{fmt.Sprintf("the links Secret %s/%s does not exist", req.Namespace, secret)}
	}
	if err != nil {
		return "", link.Link{}, fmt.Errorf("reading the links Secret %s/%s: %w", req.Namespace, secret, err)
	}
	k := s.Data[key]
	if len(k) == 0 {
		return "", link.Link{}, &LinkError{fmt.Sprintf("the links Secret %s/%s has no key %s", req.Namespace, secret, key)}
	}
	if req.Expires <= 0 {
		return "", link.Link{}, &LinkError{"--expires must be a positive duration, e.g. 24h"}
	}
	tok, l, err := link.Sign(k, link.Link{Host: host, Path: req.Path, Expires: req.Now.Add(req.Expires), Uses: req.Uses})
	if err != nil {
		return "", link.Link{}, &LinkError{err.Error()}
	}
	return link.URL(req.Scheme, l, tok), l, nil
}

// linksSecret finds the Secret and key of a policy's first links rule.
func linksSecret(p *unstructured.Unstructured) (string, string, error) {
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	for _, r := range rules {
		m, _ := r.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "links", "secretRef", "name")
		if name == "" {
			continue
		}
		key, _, _ := unstructured.NestedString(m, "links", "secretRef", "key")
		if key == "" {
			key = "key"
		}
		return name, key, nil
	}
	return "", "", &LinkError{fmt.Sprintf("AccessPolicy %s has no links rule: add one (links: {secretRef: {name: ...}}) to share links", p.GetName())}
}

// IsLinkError reports whether err is a link that cannot be made as asked.
func IsLinkError(err error) bool {
	var le *LinkError
	return errors.As(err, &le)
}
