package v1

import (
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate returns every problem of the store's spec, each with its path under "spec".
func (s *CheckpointStoreSpec) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s3 := spec.Child("s3")
	if s.S3.Bucket == "" {
		errs = append(errs, field.Required(s3.Child("bucket"), "the bucket that holds the checkpoints"))
	} else if !s3Bucket.MatchString(s.S3.Bucket) {
		errs = append(errs, field.Invalid(s3.Child("bucket"), s.S3.Bucket, "must be a bucket name: 3 to 63 lower-case letters, digits, '.' and '-'"))
	}
	if e := s.S3.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			errs = append(errs, field.Invalid(s3.Child("endpoint"), e, "must be http://host:port or https://host:port"))
		}
	}
	if s.CredentialsSecretName == "" {
		errs = append(errs, field.Required(spec.Child("credentialsSecretName"), "the Secret in each tenant namespace with the S3 credentials"))
	} else {
		errs = append(errs, dnsSubdomain(spec.Child("credentialsSecretName"), s.CredentialsSecretName)...)
	}
	if t := s.LocationTemplate; t != "" {
		tp := spec.Child("locationTemplate")
		if !strings.Contains(t, PlaceholderNamespace) {
			errs = append(errs, field.Invalid(tp, t, "must contain {{namespace}} so that tenants' checkpoints stay apart"))
		}
		if _, err := s.Location("ns", "q"); err != nil {
			errs = append(errs, field.Invalid(tp, t, "only {{namespace}} and {{name}} may be used"))
		}
	}
	for i, ns := range s.AllowedNamespaces {
		errs = append(errs, dnsLabel(spec.Child("allowedNamespaces").Index(i), ns)...)
	}
	if s.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(spec.Child("namespaceSelector"), s.NamespaceSelector.String(), err.Error()))
		}
	}
	return errs
}
