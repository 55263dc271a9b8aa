package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// NamespacePrefix returns the location prefix under which queries of namespace may keep their
// checkpoints in the store: the store's location template up to the last "/" before
// {{name}}, with {{namespace}} filled in ("s3://bucket/payments/" for the default template).
// When the template has no "/" between {{namespace}} and {{name}} (as in
// "{{namespace}}-{{name}}"), a prefix would let one namespace reach into another's names, so
// ok is false and only the template's own location is allowed.
func NamespacePrefix(s *v1.CheckpointStoreSpec, namespace string) (prefix string, ok bool) {
	tmpl := s.LocationTemplate
	if tmpl == "" {
		tmpl = v1.DefaultLocationTemplate
	}
	tmpl = strings.TrimLeft(tmpl, "/")
	before, _, _ := strings.Cut(tmpl, v1.PlaceholderName)
	ns := strings.Index(before, v1.PlaceholderNamespace)
	slash := strings.LastIndex(before, "/")
	if ns < 0 || slash < ns+len(v1.PlaceholderNamespace) {
		return "", false
	}
	return "s3://" + s.S3.Bucket + "/" + strings.ReplaceAll(before[:slash+1], v1.PlaceholderNamespace, namespace), true
}

// ValidatePlacement returns the problems of a query's checkpoint placement in its store:
// the store must exist and allow the query's namespace (whose labels are nsLabels), and the
// location must be in the store's bucket under the namespace's prefix (see NamespacePrefix).
// A nil store means the store named by the query does not exist.
func ValidatePlacement(q *v1.StreamingQuery, store *v1.CheckpointStore, nsLabels map[string]string) field.ErrorList {
	cp := field.NewPath("spec", "checkpoint")
	if q.Spec.Checkpoint.Store == "" {
		return field.ErrorList{field.Required(cp.Child("store"), "on Kubernetes a query keeps its checkpoint in a CheckpointStore: name one (kubectl get checkpointstores)")}
	}
	if store == nil {
		return field.ErrorList{field.NotFound(cp.Child("store"), q.Spec.Checkpoint.Store)}
	}
	allowed, err := store.Spec.Allows(q.Namespace, nsLabels)
	if err != nil {
		return field.ErrorList{field.InternalError(cp.Child("store"), fmt.Errorf("CheckpointStore %s: %w", store.Name, err))}
	}
	if !allowed {
		return field.ErrorList{field.Forbidden(cp.Child("store"),
			fmt.Sprintf("namespace %q may not use CheckpointStore %q: ask the platform team to add it to the store's allowedNamespaces or namespaceSelector", q.Namespace, store.Name))}
	}
	loc := checkpoint.CanonicalLocation(q.Spec.Checkpoint.Location)
	if loc == "" {
		return field.ErrorList{field.Required(cp.Child("location"), "defaulted from the store's location template by the admission webhook")}
	}
	own, err := store.Spec.Location(q.Namespace, q.Name)
	if err != nil {
		return field.ErrorList{field.InternalError(cp.Child("store"), fmt.Errorf("CheckpointStore %s: %w", store.Name, err))}
	}
	if prefix, ok := NamespacePrefix(&store.Spec, q.Namespace); ok {
		if !strings.HasPrefix(loc, prefix) || len(loc) == len(prefix) {
			return field.ErrorList{field.Forbidden(cp.Child("location"),
				fmt.Sprintf("%s is outside %s, the prefix of namespace %q in CheckpointStore %q: omit the location to get %s", loc, prefix, q.Namespace, store.Name, own))}
		}
		return nil
	}
	if loc != own {
		return field.ErrorList{field.Forbidden(cp.Child("location"),
			fmt.Sprintf("CheckpointStore %q places this query's checkpoint at %s, not %s: omit the location", store.Name, own, loc))}
	}
	return nil
}

// ValidateUniqueLocation refuses a query whose checkpoint location equals or nests inside
// (or around) the location of another query in others. The query itself (same namespace and
// name) is skipped.
func ValidateUniqueLocation(q *v1.StreamingQuery, others []v1.StreamingQuery) field.ErrorList {
	loc := q.Spec.Checkpoint.Location
	if loc == "" {
		return nil
	}
	var errs field.ErrorList
	for i := range others {
		o := &others[i]
		if o.Namespace == q.Namespace && o.Name == q.Name {
			continue
		}
		ol := o.Spec.Checkpoint.Location
		if ol == "" || !Overlaps(loc, ol) {
			continue
		}
		how := "is inside or around"
		if checkpoint.CanonicalLocation(loc) == checkpoint.CanonicalLocation(ol) {
			how = "is"
		}
		errs = append(errs, field.Forbidden(field.NewPath("spec", "checkpoint", "location"),
			fmt.Sprintf("%s %s the checkpoint of StreamingQuery %s/%s (%s): two queries on one checkpoint would fence or purge each other; choose another location", loc, how, o.Namespace, o.Name, ol)))
	}
	return errs
}

// storeDeleting refuses a store that is being deleted: its queries' engines stop, and the
// store goes once no query names it (see StoreFinalizer). It is not part of
// ValidatePlacement because a query's own deletion still uses the store, to apply its
// retention.
func storeDeleting(store *v1.CheckpointStore) field.ErrorList {
	if store == nil || store.DeletionTimestamp.IsZero() {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "checkpoint", "store"),
		fmt.Sprintf("CheckpointStore %q is being deleted: point the query at another store, or delete the query", store.Name))}
}

// revokedError says, after why the store refuses the query, that no engine runs meanwhile.
func revokedError(err error) error {
	return fmt.Errorf("%w; no engine runs until the store lets the query write again", err)
}
