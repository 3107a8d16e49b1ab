// Package keysecret defines the Secret through which the controller hands a
// tunnel's ephemeral key and the edge's pinned SSH host key to the agent.
// The controller writes it (create/patch/delete, never read) in the
// operator's namespace; the agent reads it with `get` only.
package keysecret

import (
	"fmt"

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
)

// Labels on the Secret, naming the resource it belongs to.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelOwnerKind = "k8s.tuna.am/owner-kind"
	LabelOwnerNS   = "k8s.tuna.am/owner-namespace"
	LabelOwnerName = "k8s.tuna.am/owner-name"
	LabelOwnerUID  = "k8s.tuna.am/owner-uid"
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

// Contents is what the Secret carries.
type Contents struct {
	TunnelKey string
	KeyID     string
	SSHAddr   string
	HostKey   string
	Address   string
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

// Read extracts Contents from a Secret.
func Read(s *corev1.Secret) Contents {
	return Contents{
		TunnelKey: string(s.Data[KeyTunnelKey]),
		KeyID:     string(s.Data[KeyKeyID]),
		SSHAddr:   string(s.Data[KeySSHAddr]),
		HostKey:   string(s.Data[KeyHostKey]),
		Address:   string(s.Data[KeyAddress]),
	}
}
