package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The scheme registration uses apimachinery alone (as Kubernetes' own API
// packages do), not controller-runtime's scheme.Builder: an API package
// should be cheap to import for clients of these types.

var (
	// GroupVersion is the API group and version of the operator's resources.
	GroupVersion = schema.GroupVersion{Group: "k8s.tuna.am", Version: "v1alpha1"}

	// SchemeBuilder registers the operator's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds the operator's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds kinds of this group version to SchemeBuilder; each kind's
// file calls it from init.
func register(objs ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		return nil
	})
}
