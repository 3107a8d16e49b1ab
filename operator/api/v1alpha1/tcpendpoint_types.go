package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TCPEndpointSpec is the TCP port to reserve.
type TCPEndpointSpec struct {
	// Alias of the reserved port, required: a Tunnel with protocol tcp uses
	// the port by putting this alias in spec.portOrAlias. A DNS label that is
	// not only digits, e.g. postgres. A port already reserved on the account
	// under this alias is adopted. Immutable: to change it, create a new
	// TCPEndpoint.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="alias must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, e.g. postgres"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+$')",message="alias must not be only digits: a Tunnel's portOrAlias reads a number as a port, e.g. use pg-5432"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="alias is immutable: create a new TCPEndpoint for the new alias"
	Alias string `json:"alias"`

	// ReclaimPolicy says what happens to the reserved port when this
	// TCPEndpoint is deleted: "Delete" (the default) releases it on the
	// account, "Retain" keeps it (e.g. so that a rebuilt cluster gets the
	// same port back). A port that already existed on the account and was
	// adopted (status.adopted: true) is never released, whatever the policy.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// SharedWith lists other namespaces of this cluster whose Tunnels and
	// Ingresses may publish on this reservation, as a ReferenceGrant does:
	// the reservation belongs to this namespace, and without this list no
	// other namespace may use it. Each entry is a namespace name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SharedWith []string `json:"sharedWith,omitempty"`
}

// TCPEndpointStatus is what the operator observed; it is written by the
// operator only.
type TCPEndpointStatus struct {
	// Port is the public TCP port reserved on the edge, e.g. 31337.
	// +optional
	Port int32 `json:"port,omitempty"`

	// Address is the public host:port that clients connect to, e.g.
	// a.2na.am:31337.
	// +optional
	Address string `json:"address,omitempty"`

	// Adopted is true when a port with this alias already existed on the
	// account (reserved by hand or by another cluster) and this resource took
	// it over: the operator never releases an adopted port, whatever the
	// reclaimPolicy.
	// +optional
	Adopted bool `json:"adopted,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec that this
	// status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the TCPEndpoint: Ready is True when the port is
	// reserved; when False, its reason and message say why, e.g.
	// ReservationFailed or ReleaseBlocked; Unknown (EdgeUnreachable) while
	// the edge API fails and the reservation is kept.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// TCPEndpoint reserves a public TCP port on the Tuna account under an alias.
// A Tunnel with protocol tcp publishes a Service on it by naming the alias in
// spec.portOrAlias; `kubectl get tcpendpoint` shows the public host:port. A
// port already reserved under the alias is adopted, not re-created. The
// TCPEndpoint carries a finalizer: delete it while the operator is running.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=tcpe,categories=tuna
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`,description="Public host:port"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the port is reserved"
// +kubebuilder:printcolumn:name="Adopted",type=boolean,JSONPath=`.status.adopted`,description="Whether the port already existed on the account"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the port is or is not Ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TCPEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the port to reserve: its alias, and what to do with the
	// reservation when the TCPEndpoint is deleted.
	// +required
	Spec TCPEndpointSpec `json:"spec"`

	// Status is the reserved port and its state, written by the operator.
	// +optional
	Status TCPEndpointStatus `json:"status,omitempty"`
}

// TCPEndpointList is a list of TCPEndpoints.
// +kubebuilder:object:root=true
type TCPEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TCPEndpoint `json:"items"`
}

func init() {
	register(&TCPEndpoint{}, &TCPEndpointList{})
}
