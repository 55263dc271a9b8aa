package v1

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CheckpointStore is a place for checkpoints that a platform team offers to tenant namespaces,
// like a StorageClass: an S3 or MinIO bucket, where in it each query's checkpoint goes, and who
// may use it. Each tenant namespace holds its own credentials Secret.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ckpts,categories=lockstep
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.s3.bucket`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.s3.endpoint`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Queries",type=integer,JSONPath=`.status.queries`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CheckpointStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CheckpointStoreSpec `json:"spec"`
	// +optional
	Status CheckpointStoreStatus `json:"status,omitzero"`
}

// CheckpointStoreList is a list of CheckpointStore.
//
// +kubebuilder:object:root=true
type CheckpointStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CheckpointStore `json:"items"`
}

// CheckpointStoreSpec says where checkpoints go and who may put them there.
type CheckpointStoreSpec struct {
	// S3 is the bucket holding the checkpoints.
	S3 S3Store `json:"s3"`
	// CredentialsSecretName names the Secret, in each query's own namespace, with the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. A namespace without it cannot use the store.
	// +kubebuilder:validation:MinLength=1
	CredentialsSecretName string `json:"credentialsSecretName"`
	// LocationTemplate is the key prefix of a query's checkpoint inside the bucket;
	// {{namespace}} and {{name}} stand for the query's namespace and name. Default
	// "{{namespace}}/{{name}}". It must contain {{namespace}} so tenants stay apart.
	// +optional
	// +kubebuilder:default="{{namespace}}/{{name}}"
	// +kubebuilder:validation:XValidation:rule="self.contains('{{namespace}}')",message="locationTemplate must contain {{namespace}}"
	LocationTemplate string `json:"locationTemplate,omitempty"`
	// AllowedNamespaces lists the namespaces that may use the store. A namespace is allowed
	// when it is listed here or matched by NamespaceSelector; with neither set, none is.
	// +optional
	// +listType=set
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// NamespaceSelector selects, by their labels, namespaces that may use the store.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// S3Store is an S3 or MinIO bucket.
type S3Store struct {
	// Endpoint is http://host:port or https://host:port. Omitted: AWS.
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://[^/]+/?$`
	Endpoint string `json:"endpoint,omitempty"`
	// Bucket is the bucket's name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket"`
	// Region of the bucket. Omitted: us-east-1.
	// +optional
	Region string `json:"region,omitempty"`
	// CABundle is a PEM bundle of the CAs that sign the endpoint's certificate. Omitted: the
	// system's roots.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipVerify turns off certificate verification. For tests only.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CheckpointStoreStatus is what the controller observed of a store.
type CheckpointStoreStatus struct {
	// Conditions: Ready, True when the controller's probe with the credentials of an allowed
	// namespace listed the bucket and saw it refuse a second create-if-absent of one object
	// (what checkpoints depend on); False with the reason when it did not (BucketMissing,
	// CredentialsRejected, AccessDenied, ConditionalWritesIgnored, Unreachable,
	// InvalidSettings), or while the store is being deleted (Deleting); Unknown when no allowed
	// namespace holds the credentials Secret yet (NoCredentials).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Queries counts the StreamingQueries that name this store. While it is above zero a
	// deletion of the store waits (finalizer streaming.lockstep.dev/store-in-use).
	// +optional
	Queries int32 `json:"queries"`
	// ProbedNamespace is the namespace whose credentials Secret the last probe used.
	// +optional
	ProbedNamespace string `json:"probedNamespace,omitempty"`
	// LastProbeTime is when the controller last probed the store.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Condition reasons of a CheckpointStore's Ready condition.
const (
	// ReasonProbed: the probe listed the bucket and the server honoured If-None-Match.
	ReasonProbed = "Probed"
	// ReasonBucketMissing: the bucket does not exist.
	ReasonBucketMissing = "BucketMissing"
	// ReasonCredentialsRejected: the server does not know the access key, or the secret is wrong.
	ReasonCredentialsRejected = "CredentialsRejected"
	// ReasonAccessDenied: the credentials are valid but may not list or write the namespace's prefix.
	ReasonAccessDenied = "AccessDenied"
	// ReasonConditionalWritesIgnored: a second create-if-absent of one object succeeded, so
	// two engines could both write one batch: the store must not hold checkpoints.
	ReasonConditionalWritesIgnored = "ConditionalWritesIgnored"
	// ReasonUnreachable: the endpoint did not answer, or answered with an error that says
	// nothing of the store (a retry may succeed).
	ReasonUnreachable = "Unreachable"
	// ReasonInvalidSettings: the store's own settings cannot work (a caBundle without a
	// certificate, a location template that renders no location).
	ReasonInvalidSettings = "InvalidSettings"
	// ReasonNoCredentials: no namespace the store allows holds its credentials Secret, so
	// there is nothing to probe with.
	ReasonNoCredentials = "NoCredentials"
	// ReasonDeleting: the store is being deleted and waits for the queries that use it.
	ReasonDeleting = "Deleting"
)

// DefaultLocationTemplate is the default CheckpointStoreSpec.LocationTemplate.
const DefaultLocationTemplate = "{{namespace}}/{{name}}"

// Placeholders of CheckpointStoreSpec.LocationTemplate.
const (
	PlaceholderNamespace = "{{namespace}}"
	PlaceholderName      = "{{name}}"
)

// Location returns the checkpoint location of the query namespace/name in the store:
// s3://<bucket>/<rendered template>. It errors when the template holds an unknown placeholder.
func (s *CheckpointStoreSpec) Location(namespace, name string) (string, error) {
	tmpl := s.LocationTemplate
	if tmpl == "" {
		tmpl = DefaultLocationTemplate
	}
	prefix := strings.NewReplacer(PlaceholderNamespace, namespace, PlaceholderName, name).Replace(tmpl)
	if strings.Contains(prefix, "{{") || strings.Contains(prefix, "}}") {
		return "", fmt.Errorf("location template %q: only %s and %s may be used", tmpl, PlaceholderNamespace, PlaceholderName)
	}
	return "s3://" + s.S3.Bucket + "/" + strings.Trim(prefix, "/"), nil
}

// Allows reports whether a namespace with the given name and labels may use the store.
func (s *CheckpointStoreSpec) Allows(namespace string, namespaceLabels map[string]string) (bool, error) {
	if slices.Contains(s.AllowedNamespaces, namespace) {
		return true, nil
	}
	if s.NamespaceSelector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("namespace selector: %w", err)
	}
	return sel.Matches(labels.Set(namespaceLabels)), nil
}
