package upstream

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// Kinds of object a CA bundle is read from.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
	// DefaultCAKey is the data key read when none is named (cert-manager
	// and trust-manager write ca.crt).
	DefaultCAKey = "ca.crt"
)

// CARef names a CA bundle: a key of a Secret or ConfigMap of the
// resource's own namespace.
type CARef struct {
	Kind, Name, Key string
}

func (r CARef) String() string { return fmt.Sprintf("%s %s (key %s)", r.Kind, r.Name, r.key()) }

func (r CARef) key() string {
	if r.Key == "" {
		return DefaultCAKey
	}
	return r.Key
}

// ParseCARef reads the annotation form of a CA reference:
// secret/NAME or configmap/NAME, optionally followed by /KEY.
func ParseCARef(s string) (CARef, error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	bad := func(why string) (CARef, error) {
		return CARef{}, fmt.Errorf("%q is not a CA reference (%s): write secret/NAME or configmap/NAME, optionally /KEY (default %s)", s, why, DefaultCAKey)
	}
	if len(parts) < 2 || len(parts) > 3 {
		return bad("two or three parts separated by /")
	}
	ref := CARef{Name: parts[1]}
	switch strings.ToLower(parts[0]) {
	case "secret":
		ref.Kind = KindSecret
	case "configmap":
		ref.Kind = KindConfigMap
	default:
		return bad("the kind is secret or configmap")
	}
	if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
		return bad("the name: " + strings.Join(errs, "; "))
	}
	if len(parts) == 3 {
		if errs := validation.IsConfigMapKey(parts[2]); len(errs) > 0 {
			return bad("the key: " + strings.Join(errs, "; "))
		}
		ref.Key = parts[2]
	}
	return ref, nil
}

// ReadCA reads the PEM bundle ref names in namespace, with `get` only.
// A missing object or key is a Refusal with ReasonTLS: the user fixes it.
func ReadCA(ctx context.Context, reader client.Reader, namespace string, ref CARef) ([]byte, error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	var data []byte
	var found bool
	var err error
	switch ref.Kind {
	case KindSecret:
		var s corev1.Secret
		if err = reader.Get(ctx, key, &s); err == nil {
			data, found = s.Data[ref.key()]
		}
	case KindConfigMap:
		var cm corev1.ConfigMap
		if err = reader.Get(ctx, key, &cm); err == nil {
			var v string
			v, found = cm.Data[ref.key()]
			data = []byte(v)
			if !found {
				data, found = cm.BinaryData[ref.key()]
			}
		}
	default:
		return nil, &Refusal{Reason: ReasonTLS, Message: fmt.Sprintf("the CA bundle's kind %q is neither Secret nor ConfigMap", ref.Kind)}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, &Refusal{Reason: ReasonTLS, Message: fmt.Sprintf("the CA bundle %s %s/%s does not exist: create it, or fix the reference", ref.Kind, namespace, ref.Name)}
	case err != nil:
		return nil, fmt.Errorf("reading the CA bundle %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	case !found || len(data) == 0:
		return nil, &Refusal{Reason: ReasonTLS, Message: fmt.Sprintf("%s %s/%s has no key %s: put the CA certificates (PEM) there, or name the key that holds them", ref.Kind, namespace, ref.Name, ref.key())}
	}
	return data, nil
}

// TLSOptions are what a resource says about its https upstream's
// certificate: a Tunnel's spec.upstream.tls, an Ingress's or Service's
// k8s.tuna.am/upstream-* annotations.
type TLSOptions struct {
	CA                 *CARef
	ServerName         string
	InsecureSkipVerify bool
}

// TLSSettings are how an https upstream's certificate is checked once its
// options are resolved: the CA bundle read (nil: the system's roots), the
// name the certificate must hold, or no check at all when asked by name.
// The agent's proxy dials with them (proxy.TLS holds the same fields, and
// the agent converts); this package imports nothing of the agent.
type TLSSettings struct {
	CA                 []byte
	ServerName         string
	InsecureSkipVerify bool
}

// TLS resolves the TLS settings of an https target of namespace: the CA
// bundle read and checked, and the server name, by default the Service's
// cluster name <service>.<namespace>.svc, the name in-cluster certificates
// are issued for (cert-manager's usual dnsNames), or the host as written
// for an external upstream. A bundle that holds no certificate is a
// Refusal.
func TLS(ctx context.Context, reader client.Reader, namespace string, t Target, o TLSOptions) (*TLSSettings, error) {
	out := &TLSSettings{ServerName: o.ServerName, InsecureSkipVerify: o.InsecureSkipVerify}
	if out.ServerName == "" {
		out.ServerName = t.Host
		if t.Service != "" {
			ns := t.Namespace
			if ns == "" {
				ns = namespace
			}
			out.ServerName = t.Service + "." + ns + ".svc"
		}
	}
	if o.CA != nil {
		pem, err := ReadCA(ctx, reader, namespace, *o.CA)
		if err != nil {
			return nil, err
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, &Refusal{Reason: ReasonTLS, Message: fmt.Sprintf("the CA bundle %s of namespace %s holds no PEM certificate", o.CA, namespace)}
		}
		out.CA = pem
	}
	return out, nil
}

// SchemeH2C is the scheme of an upstream that speaks cleartext HTTP/2
// (prior knowledge), as the agent's proxy names it.
const SchemeH2C = "h2c"

// AppProtocolH2C is the appProtocol of a Service port that speaks
// cleartext HTTP/2 (gRPC without TLS), as Gateway API defines it; the bare
// h2c is taken too.
const AppProtocolH2C = "kubernetes.io/h2c"

// AppScheme is what a Service port's appProtocol says about how to speak
// HTTP to it: "h2c" (cleartext HTTP/2), "https" (TLS), or "" when it says
// nothing of either.
func AppScheme(p *corev1.ServicePort) string {
	if p == nil || p.AppProtocol == nil {
		return ""
	}
	switch strings.ToLower(*p.AppProtocol) {
	case AppProtocolH2C, "h2c":
		return SchemeH2C
	case "https", "kubernetes.io/wss":
		return "https"
	}
	return ""
}

// TLSAnnotations reads the upstream TLS annotations of an Ingress or a
// LoadBalancer Service (k8s.tuna.am/upstream-ca, -server-name,
// -insecure-skip-verify). A malformed one is a Refusal that names it.
func TLSAnnotations(ann map[string]string) (TLSOptions, error) {
	var o TLSOptions
	bad := func(name, format string, args ...any) (TLSOptions, error) {
		return TLSOptions{}, &Refusal{Reason: ReasonTLS, Message: "annotation " + name + ": " + fmt.Sprintf(format, args...)}
	}
	if v, ok := ann[tunav1.AnnotationUpstreamCA]; ok {
		ref, err := ParseCARef(v)
		if err != nil {
			return bad(tunav1.AnnotationUpstreamCA, "%v", err)
		}
		o.CA = &ref
	}
	if v, ok := ann[tunav1.AnnotationUpstreamServerName]; ok {
		v = strings.TrimSpace(v)
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 && net.ParseIP(v) == nil {
			return bad(tunav1.AnnotationUpstreamServerName, "%q is neither a lowercase DNS name such as web.team.svc nor an IP address", v)
		}
		o.ServerName = v
	}
	if v, ok := ann[tunav1.AnnotationUpstreamInsecureSkipVerify]; ok {
		switch strings.TrimSpace(v) {
		case "true":
			o.InsecureSkipVerify = true
		case "false":
		default:
			return bad(tunav1.AnnotationUpstreamInsecureSkipVerify, "%q is neither \"true\" nor \"false\"", v)
		}
	}
	if o.InsecureSkipVerify && o.CA != nil {
		return bad(tunav1.AnnotationUpstreamInsecureSkipVerify, "\"true\" checks no certificate, so %s would be ignored: remove one of them", tunav1.AnnotationUpstreamCA)
	}
	return o, nil
}
