// Package keysecret defines the Secret through which the controller hands a
// tunnel's ephemeral key and the edge's pinned SSH host key to the agent.
// The controller writes it (create/patch/delete, never read) in the
// operator's namespace; the agent reads it with `get` only.
package keysecret

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// Data keys of the Secret.
const (
	// KeyTunnelKey holds the ephemeral tunnel key; absent when the tunnel
	// uses the user's own key (spec.apiKeySecretRef).
	KeyTunnelKey = "tunnel-key"
	// KeyKeyID is the tunnel key's ID on the edge.
	KeyKeyID = "key-id"
	// KeySSHAddr is the edge's SSH address.
	KeySSHAddr = "ssh-addr"
	// KeyHostKey is the edge's SSH host key, authorized_keys form.
	KeyHostKey = "ssh-host-key"
	// KeyAddress is the address the tunnel binds: a host name or subdomain
	// (http) or an alias or port (tcp).
	KeyAddress = "address"
	// KeyLBHostname is what an Ingress host's status.loadBalancer shows:
	// the host itself for a subdomain of the edge's base domain, the CNAME
	// target for a custom domain (so external-dns creates the right record).
	KeyLBHostname = "lb-hostname"
	// KeyNamespaces lists, comma-separated, the namespaces whose Ingresses
	// may serve an Ingress host: the host's owner and those it shares it
	// with. Absent: every namespace (a Secret of an older controller).
	KeyNamespaces = "namespaces"
	// KeyOwner is the namespace that owns an Ingress host (the one its key
	// is issued for): the only one whose Ingresses and HTTPRoutes may
	// attach an access policy to the host.
	KeyOwner = "owner"
)

// Labels on the Secret, naming the resource it belongs to.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelOwnerKind = "k8s.tuna.am/owner-kind"
	LabelOwnerNS   = "k8s.tuna.am/owner-namespace"
	LabelOwnerName = "k8s.tuna.am/owner-name"
	LabelOwnerUID  = "k8s.tuna.am/owner-uid"
	// AnnotationHost is the Ingress host of a host key Secret (a host may
	// be longer than a label value).
	AnnotationHost = "k8s.tuna.am/host"
)

// Name is the Secret's name for an owner: derived from its UID, so a
// re-created resource with the same name never sees a stale key.
func Name(kind string, uid types.UID) string {
	switch kind {
	case "Ingress":
		return fmt.Sprintf("tuna-ingress-%s", uid)
	default:
		return fmt.Sprintf("tuna-tunnel-%s", uid)
	}
}

// HostName is the Secret's name for an Ingress host's key. The key belongs
// to the host, not to one Ingress: several Ingresses may serve one host, and
// the oldest of them may go while the host stays. The name is derived from
// the host (a short hash: hosts may be longer than a name allows).
func HostName(host string) string {
	sum := sha256.Sum256([]byte(host))
	return "tuna-ingress-host-" + hex.EncodeToString(sum[:10])
}

// Contents is what the Secret carries.
type Contents struct {
	TunnelKey string
	KeyID     string
	SSHAddr   string
	HostKey   string
	Address   string
	// LBHostname is set for Ingress hosts only.
	LBHostname string
	// Namespaces is set for Ingress hosts only; nil: no limit.
	Namespaces []string
	// Owner is set for Ingress hosts only: the host's owner namespace.
	Owner string
}

// Apply returns the apply configuration of an owner's Secret, for
// server-side apply: the controller can write it without being allowed to
// read Secrets.
func Apply(namespace, kind string, owner metav1.Object, c Contents) *corev1ac.SecretApplyConfiguration {
	data := map[string][]byte{
		KeyKeyID:   []byte(c.KeyID),
		KeySSHAddr: []byte(c.SSHAddr),
		KeyHostKey: []byte(c.HostKey),
		KeyAddress: []byte(c.Address),
	}
	if c.TunnelKey != "" {
		data[KeyTunnelKey] = []byte(c.TunnelKey)
	}
	return corev1ac.Secret(Name(kind, owner.GetUID()), namespace).
		WithLabels(map[string]string{
			LabelManagedBy: "tuna-operator",
			LabelOwnerKind: kind,
			LabelOwnerNS:   owner.GetNamespace(),
			LabelOwnerName: owner.GetName(),
			LabelOwnerUID:  string(owner.GetUID()),
		}).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}

// ApplyHost returns the apply configuration of an Ingress host's Secret.
func ApplyHost(namespace, host string, c Contents) *corev1ac.SecretApplyConfiguration {
	data := map[string][]byte{
		KeyKeyID:      []byte(c.KeyID),
		KeySSHAddr:    []byte(c.SSHAddr),
		KeyHostKey:    []byte(c.HostKey),
		KeyAddress:    []byte(c.Address),
		KeyTunnelKey:  []byte(c.TunnelKey),
		KeyLBHostname: []byte(c.LBHostname),
	}
	if c.Namespaces != nil {
		data[KeyNamespaces] = []byte(strings.Join(c.Namespaces, ","))
	}
	if c.Owner != "" {
		data[KeyOwner] = []byte(c.Owner)
	}
	return corev1ac.Secret(HostName(host), namespace).
		WithLabels(map[string]string{LabelManagedBy: "tuna-operator", LabelOwnerKind: "Ingress"}).
		WithAnnotations(map[string]string{AnnotationHost: host}).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}

// Read extracts Contents from a Secret.
func Read(s *corev1.Secret) Contents {
	return Contents{
		TunnelKey: string(s.Data[KeyTunnelKey]),
		KeyID:     string(s.Data[KeyKeyID]),
		SSHAddr:   string(s.Data[KeySSHAddr]),
		HostKey:   string(s.Data[KeyHostKey]),
		Address:   string(s.Data[KeyAddress]),

		LBHostname: string(s.Data[KeyLBHostname]),
		Namespaces: namespaces(s.Data),
		Owner:      string(s.Data[KeyOwner]),
	}
}

func namespaces(data map[string][]byte) []string {
	v, ok := data[KeyNamespaces]
	if !ok {
		return nil
	}
	if len(v) == 0 {
		return []string{}
	}
	return strings.Split(string(v), ",")
}
