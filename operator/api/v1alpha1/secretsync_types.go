package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretSyncSource picks the edge secrets to take: exactly one of name or
// prefix.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.prefix)",message="set exactly one of source.name (one edge secret, e.g. team-a/db) or source.prefix (every edge secret whose name starts with it, e.g. team-a/)",fieldPath=".name"
type SecretSyncSource struct {
	// Name of one secret on the edge, e.g. team-a/db: lowercase letters,
	// digits, '.', '_', '-' and '/', starting and ending with a letter or
	// digit.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?$') && !self.contains('//') && !self.split('/').exists(p, p == '..' || p == '.')",message="source.name must be an edge secret name: lowercase letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit, no empty, '.' or '..' parts, e.g. team-a/db"
	Name string `json:"name,omitempty"`

	// Prefix takes every edge secret whose name starts with it, e.g.
	// team-a/app-, and merges their keys into one Secret; two secrets with
	// the same key are an error (reason KeyConflict).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9._/-]*$') && !self.contains('//')",message="source.prefix must start an edge secret name: lowercase letters, digits, '.', '_', '-' and '/', starting with a letter or digit, e.g. team-a/"
	Prefix string `json:"prefix,omitempty"`
}

// KeyMapping copies one key of the edge secret(s) into the target Secret,
// under a new name when `to` is set.
type KeyMapping struct {
	// From is the key in the edge secret, e.g. password.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	From string `json:"from"`

	// To is the key in the target Secret, e.g. DB_PASSWORD; default: the
	// same as from.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	To string `json:"to,omitempty"`
}

// SecretSyncTarget is the Secret the operator writes, in the SecretSync's
// namespace.
//
// +kubebuilder:validation:XValidation:rule="!has(self.keys) || !has(self.template) || self.keys.all(k, !((has(k.to) ? k.to : k.from) in self.template))",message="a key is written twice: a target key of target.keys is also a key of target.template; rename one of them",fieldPath=".template"
// +kubebuilder:validation:XValidation:rule="!has(self.adoptExisting) || !self.adoptExisting || has(self.name)",message="target.adoptExisting takes over a Secret only when target.name names it: set target.name to the existing Secret's name",fieldPath=".adoptExisting"
// +kubebuilder:validation:XValidation:rule="!has(self.keys) || self.keys.all(a, self.keys.exists_one(b, (has(b.to) ? b.to : b.from) == (has(a.to) ? a.to : a.from)))",message="two entries of target.keys write the same target key; give each a different 'to'",fieldPath=".keys"
type SecretSyncTarget struct {
	// Name of the Secret to write, in the same namespace. Default: the
	// SecretSync's own name. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="target.name must be the name of a Secret: lowercase letters, digits, '-' and '.', e.g. db-credentials"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="target.name is immutable: create a new SecretSync for another Secret"
	Name string `json:"name,omitempty"`

	// Keys, when set, copies only these keys (renamed by `to`); when unset,
	// every key of the edge secret(s) is copied as it is.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Keys []KeyMapping `json:"keys,omitempty"`

	// Template adds computed keys: target key → Go text/template over the
	// edge secret's values, e.g. DSN: "postgres://{{ .user }}:{{ .password }}@db:5432/app".
	// Functions: b64enc, b64dec, upper, lower, trim, quote. A key missing
	// from the edge secret is an error (reason TemplateFailed), not an
	// empty string.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[-._a-zA-Z0-9]+$') && size(k) <= 253)",message="target.template keys must be Secret keys: letters, digits, '-', '_' and '.', e.g. DSN"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 8192)",message="a target.template value is at most 8192 characters"
	Template map[string]string `json:"template,omitempty"`

	// AdoptExisting lets the operator take over the Secret that target.name
	// names (it must be set) though it did not create it: the Secret becomes
	// owned by this SecretSync and its keys are replaced. Without it, an
	// existing foreign Secret is never overwritten (reason TargetNotOwned).
	// +optional
	AdoptExisting bool `json:"adoptExisting,omitempty"`
}

// DeletionPolicy says what happens to the target Secret when the SecretSync
// is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

const (
	// DeletionDelete deletes the target Secret with the SecretSync. It is the
	// default.
	DeletionDelete DeletionPolicy = "Delete"

	// DeletionRetain keeps the target Secret, with its last synced data and
	// no owner, when the SecretSync is deleted.
	DeletionRetain DeletionPolicy = "Retain"
)

// SecretSyncSpec is what to sync from the edge, and into which Secret.
type SecretSyncSpec struct {
	// Source is the edge secret(s) to take.
	// +required
	Source SecretSyncSource `json:"source"`

	// Target is the Secret to write. Default: a Secret named like the
	// SecretSync, with every key of the source.
	// +optional
	Target SecretSyncTarget `json:"target,omitempty"`

	// RefreshInterval is how often the operator compares the Secret with the
	// edge even when the edge sent no change notice (it usually does, within
	// a second), e.g. 1m, 30s or 1h. Between 10s and 24h; default 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="refreshInterval must be between 10s and 24h, e.g. 1m"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// DeletionPolicy: "Delete" (the default) deletes the target Secret with
	// the SecretSync; "Retain" keeps it, with its last data.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// APIKeySecretRef makes the sync use your own Tuna API key instead of
	// the operator's: the name of a Secret in this namespace whose key
	// "api-key" holds an API key with the secrets:read scope (ideally
	// confined to your team's secret prefix on the edge). Without it, the
	// operator's key is used within the operator's policy (by default,
	// only edge secrets named <namespace>/...).
	// +optional
	APIKeySecretRef *SecretKeyReference `json:"apiKeySecretRef,omitempty"`
}

// SyncedSecret is one edge secret and the version of it the target holds.
type SyncedSecret struct {
	// Name of the edge secret.
	Name string `json:"name"`
	// Version of it that was written to the target Secret.
	Version int64 `json:"version"`
}

// SecretSyncStatus is what the operator observed; it is written by the
// operator only.
type SecretSyncStatus struct {
	// Target is the name of the Secret written.
	// +optional
	Target string `json:"target,omitempty"`

	// Sources are the edge secrets and versions the target Secret holds.
	// +optional
	// +listType=atomic
	Sources []SyncedSecret `json:"sources,omitempty"`

	// SyncedVersion sums up sources for `kubectl get`: the version of a
	// single source, or name@version pairs for a prefix.
	// +optional
	SyncedVersion string `json:"syncedVersion,omitempty"`

	// LastSyncTime is when the target Secret was last found or made equal
	// to the edge's secrets.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec that this
	// status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True while the target Secret holds the edge's
	// current values; when False or Unknown, its reason and message say
	// what to do (e.g. SourceNotFound, NotAllowed, TargetNotOwned).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// SecretSync keeps a Secret of its namespace equal to secrets kept on the
// Tuna edge (`tuna-edge secrets set`, or PUT /v1/secrets), and current as
// they change. The Secret is owned by the SecretSync and written by the
// operator alone; a Secret it did not create is never overwritten unless
// spec.target.adoptExisting says so. While the edge cannot be reached, the
// last synced Secret stays as it is.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=tuna
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target`,description="The Secret written"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.syncedVersion`,description="Version(s) of the edge secret(s) in the Secret"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the Secret holds the edge's current values"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why the sync is or is not Ready"
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`,priority=1,description="When the Secret was last confirmed current"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is which edge secrets to sync into which Secret.
	// +required
	Spec SecretSyncSpec `json:"spec"`

	// Status is the sync's state, written by the operator.
	// +optional
	Status SecretSyncStatus `json:"status,omitempty"`
}

// SecretSyncList is a list of SecretSyncs.
// +kubebuilder:object:root=true
type SecretSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretSync `json:"items"`
}

func init() {
	register(&SecretSync{}, &SecretSyncList{})
}
