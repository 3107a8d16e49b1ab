package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the operator's resources.
	GroupVersion = schema.GroupVersion{Group: "k8s.tuna.am", Version: "v1alpha1"}

	// SchemeBuilder registers the operator's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the operator's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
