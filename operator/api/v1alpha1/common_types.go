package v1alpha1

// ReclaimPolicy says what happens to a reservation on the Tuna account when
// the Domain or TCPEndpoint that made it is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

const (
	// ReclaimDelete releases the reservation when the resource is deleted.
	// It is the default.
	ReclaimDelete ReclaimPolicy = "Delete"

	// ReclaimRetain keeps the reservation on the account when the resource
	// is deleted, e.g. so that a rebuilt cluster gets the same domain or port
	// back by creating the resource again.
	ReclaimRetain ReclaimPolicy = "Retain"
)
