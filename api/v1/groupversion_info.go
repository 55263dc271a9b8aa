package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of every Lockstep kind.
const Group = "streaming.lockstep.dev"

// Version is the API version of this package.
const Version = "v1"

// Kind names, as they appear in manifests.
const (
	KindStreamingQuery  = "StreamingQuery"
	KindCheckpointStore = "CheckpointStore"
)

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme. It is the function
	// controller-runtime and client-go expect: scheme := runtime.NewScheme(); v1.AddToScheme(scheme).
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&StreamingQuery{}, &StreamingQueryList{},
		&CheckpointStore{}, &CheckpointStoreList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
