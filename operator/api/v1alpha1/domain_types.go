package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DomainSpec is the domain to reserve: exactly one of subdomain or domain.
//
// +kubebuilder:validation:XValidation:rule="has(self.subdomain) || has(self.domain)",message="set one of subdomain (a name under the edge's base domain, e.g. my-app) or domain (your own domain, e.g. api.example.com)",fieldPath=".subdomain",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!(has(self.subdomain) && has(self.domain))",message="set only one of subdomain or domain: remove one of them",fieldPath=".domain",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.subdomain) == has(oldSelf.subdomain) && has(self.domain) == has(oldSelf.domain)",message="switching a Domain between subdomain and domain is not allowed: create a new Domain",fieldPath=".subdomain"
type DomainSpec struct {
	// Subdomain reserves a permanent name under the edge's base domain:
	// "my-app" reserves my-app.<base domain>, e.g. my-app.a.2na.am (see
	// status.fqdn). A DNS label: lowercase letters, digits and '-', at most
	// 63 characters. Set either subdomain or domain. Immutable: to change
	// it, create a new Domain.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="subdomain must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, e.g. my-app"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="subdomain is immutable: create a new Domain for the new subdomain"
	Subdomain string `json:"subdomain,omitempty"`

	// Domain reserves your own domain name (a fully qualified name, no
	// trailing dot), e.g. api.example.com. The DNS records to create at your
	// DNS provider appear in status.dnsRecords; until they are in place the
	// Domain is not Ready and the operator checks again every 5 minutes.
	// Set either subdomain or domain. Immutable: to change it, create a new
	// Domain.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])+[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')",message="domain must be a lowercase fully qualified domain name without a trailing dot or wildcard, each label at most 63 characters, e.g. api.example.com"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="domain is immutable: create a new Domain for the new domain"
	Domain string `json:"domain,omitempty"`

	// ReclaimPolicy says what happens to the reservation when this Domain is
	// deleted: "Delete" (the default) releases it on the account, "Retain"
	// keeps it (e.g. so that a rebuilt cluster gets it back). A domain that
	// already existed on the account and was adopted (status.adopted: true)
	// is never released, whatever the policy.
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

	// AccessPolicyRef names an AccessPolicy of the Domain's namespace that
	// the edge enforces on the domain, whoever publishes on it (the
	// namespaces of sharedWith too), before a request enters the cluster.
	// It wins over a Tunnel's own accessPolicyRef.
	// +optional
	AccessPolicyRef *LocalAccessPolicyReference `json:"accessPolicyRef,omitempty"`
}

// DNSRecord is a DNS record to create at your DNS provider for a custom
// domain.
type DNSRecord struct {
	// Type of the record, e.g. CNAME or TXT.
	Type string `json:"type"`

	// Name of the record (the fully qualified name to create it for), e.g.
	// api.example.com or _tuna-challenge.api.example.com.
	Name string `json:"name"`

	// Value of the record, e.g. the edge's host name for a CNAME or the
	// verification token for a TXT record.
	Value string `json:"value"`
}

// DomainStatus is what the operator observed; it is written by the operator
// only.
type DomainStatus struct {
	// FQDN is the full domain name reserved, e.g. my-app.a.2na.am or
	// api.example.com: use it as the host of an Ingress with
	// ingressClassName: tuna.
	// +optional
	FQDN string `json:"fqdn,omitempty"`

	// Adopted is true when the domain already existed on the account
	// (reserved by hand or by another cluster) and this resource took it
	// over: the operator never releases an adopted domain, whatever the
	// reclaimPolicy.
	// +optional
	Adopted bool `json:"adopted,omitempty"`

	// Verified is true when the DNS records of a custom domain were found in
	// place. Always true for a subdomain of the base domain.
	// +optional
	Verified bool `json:"verified,omitempty"`

	// DNSRecords to create at your DNS provider, for a custom domain (spec.domain)
	// only.
	// +optional
	// +listType=atomic
	DNSRecords []DNSRecord `json:"dnsRecords,omitempty"`

	// LastVerifiedTime is when the operator last checked the DNS records of a
	// custom domain; a failed check is retried every 5 minutes.
	// +optional
	LastVerifiedTime *metav1.Time `json:"lastVerifiedTime,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec that this
	// status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the Domain: Ready is True when the domain is reserved
	// (and, for a custom domain, its DNS records are verified); when False,
	// its reason and message say why, e.g. DNSPending or AddressTaken.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Domain reserves a domain on the Tuna account: a permanent subdomain of the
// edge's base domain (spec.subdomain) or your own domain (spec.domain). Use
// it in a Tunnel (spec.domainRef) or as the host of an Ingress with
// ingressClassName: tuna; `kubectl get domain` shows its full name. A domain
// already on the account is adopted, not re-created. The Domain carries a
// finalizer: delete it while the operator is running.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=tuna
// +kubebuilder:printcolumn:name="FQDN",type=string,JSONPath=`.status.fqdn`,description="Full domain name reserved"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the domain is reserved (and verified)"
// +kubebuilder:printcolumn:name="Adopted",type=boolean,JSONPath=`.status.adopted`,description="Whether the domain already existed on the account"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the domain is or is not Ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Domain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the domain to reserve: exactly one of subdomain (a permanent
	// name under the edge's base domain) or domain (your own domain). A
	// Domain cannot be switched between the two, nor renamed: create a new
	// Domain instead.
	// +required
	Spec DomainSpec `json:"spec"`

	// Status is the reserved name and its state, written by the operator.
	// +optional
	Status DomainStatus `json:"status,omitempty"`
}

// DomainList is a list of Domains.
// +kubebuilder:object:root=true
type DomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Domain `json:"items"`
}

func init() {
	register(&Domain{}, &DomainList{})
}
