package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// Where the engine container receives the Secrets a query names. Each Secret is mounted
// whole, read-only, in a folder of its own under SecretsMountPath; the webhook sink's headers
// Secret in WebhookHeadersDir, which the engine is told with --webhook-headers-dir.
const (
	SecretsMountPath  = "/var/run/secrets/lockstep/secrets"
	WebhookHeadersDir = "/var/run/secrets/lockstep/webhook-headers"
)

// Keys of the Secrets the spec names: credentials (Kafka SASL, a Schema Registry's basic
// authentication), a CA bundle, a kubernetes.io/tls pair.
const (
	KeySASLUsername = "username"
	KeySASLPassword = "password"
	KeyCA           = "ca.crt"
	KeyTLSCert      = corev1.TLSCertKey       // tls.crt
	KeyTLSKey       = corev1.TLSPrivateKeyKey // tls.key
)

// EnvSessionToken is the optional key of the store's credentials Secret (and the variable)
// with an S3 session token, for temporary credentials.
const EnvSessionToken = s3.EnvSessionToken

// secretUse is one Secret reference of a spec and how the engine pod receives it: some keys
// as environment variables (secretKeyRef), or the whole Secret mounted as a folder whose
// files the engine reads. Every reference the controller wires is one secretUse, built in
// secretUses; wiring one more kind is one more entry there.
type secretUse struct {
	// field is the spec field that names the Secret, for admission's refusals.
	field *field.Path
	// secret is the Secret's name, in the query's namespace.
	secret string
	// env fills variables from keys of the Secret.
	env []secretEnv
	// dir is the folder the Secret is mounted at; "" when it is not mounted.
	dir string
}

// secretEnv is one variable filled from one key of a Secret.
type secretEnv struct {
	name, key string
	// optional leaves the variable unset when the key is absent (else the pod waits for it).
	optional bool
}

// secretDir is the folder a Secret named by the spec is mounted at.
func secretDir(secret string) string { return path.Join(SecretsMountPath, secret) }

// secretUses returns the Secret references of spec, in spec order, and points the file fields
// of spec (the engine's copy) at the folders the Secrets are mounted in: a caSecretName sets
// tls.caFile (schemaRegistry.caFile), a clientSecretName tls.certFile and tls.keyFile. Call
// it on a copy of the spec.
func secretUses(spec *v1.StreamingQuerySpec) []secretUse {
	var uses []secretUse
	kafka := func(p *field.Path, sasl *v1.KafkaSASL, t *v1.KafkaTLS) {
		if sasl != nil && sasl.SecretName != "" {
			uses = append(uses, secretUse{field: p.Child("sasl", "secretName"), secret: sasl.SecretName, env: []secretEnv{
				{name: cmp.Or(sasl.UsernameEnv, v1.DefaultKafkaUsernameEnv), key: KeySASLUsername},
				{name: cmp.Or(sasl.PasswordEnv, v1.DefaultKafkaPasswordEnv), key: KeySASLPassword},
			}})
		}
		if t == nil {
			return
		}
		if t.CASecretName != "" {
			uses = append(uses, secretUse{field: p.Child("tls", "caSecretName"), secret: t.CASecretName, dir: secretDir(t.CASecretName)})
			t.CAFile = path.Join(secretDir(t.CASecretName), KeyCA)
		}
		if t.ClientSecretName != "" {
			uses = append(uses, secretUse{field: p.Child("tls", "clientSecretName"), secret: t.ClientSecretName, dir: secretDir(t.ClientSecretName)})
			t.CertFile = path.Join(secretDir(t.ClientSecretName), KeyTLSCert)
			t.KeyFile = path.Join(secretDir(t.ClientSecretName), KeyTLSKey)
		}
	}
	registry := func(p *field.Path, r *v1.SchemaRegistry) {
		if r == nil {
			return
		}
		p = p.Child("schemaRegistry")
		if r.SecretName != "" {
			uses = append(uses, secretUse{field: p.Child("secretName"), secret: r.SecretName, env: []secretEnv{
				{name: cmp.Or(r.UsernameEnv, v1.DefaultSchemaRegistryUsernameEnv), key: KeySASLUsername},
				{name: cmp.Or(r.PasswordEnv, v1.DefaultSchemaRegistryPasswordEnv), key: KeySASLPassword},
			}})
		}
		if r.CASecretName != "" {
			uses = append(uses, secretUse{field: p.Child("caSecretName"), secret: r.CASecretName, dir: secretDir(r.CASecretName)})
			r.CAFile = path.Join(secretDir(r.CASecretName), KeyCA)
		}
	}
	sources := field.NewPath("spec", "sources")
	for i := range spec.Sources {
		if k := spec.Sources[i].Kafka; k != nil {
			kafka(sources.Index(i).Child("kafka"), k.SASL, k.TLS)
			registry(sources.Index(i).Child("kafka"), k.SchemaRegistry)
		}
	}
	sink := field.NewPath("spec", "sink")
	if k := spec.Sink.Kafka; k != nil {
		kafka(sink.Child("kafka"), k.SASL, k.TLS)
		registry(sink.Child("kafka"), k.SchemaRegistry)
	}
	s3conn := func(p *field.Path, c *v1.S3Connection, name string) {
		if c == nil || c.SecretName == "" {
			return
		}
		prefix := v1.S3CredentialsEnvPrefix(c, name)
		uses = append(uses, secretUse{field: p.Child("s3", "secretName"), secret: c.SecretName, env: []secretEnv{
			{name: prefix + EnvAccessKeyID, key: EnvAccessKeyID},
			{name: prefix + EnvSecretAccessKey, key: EnvSecretAccessKey},
			{name: prefix + EnvSessionToken, key: EnvSessionToken, optional: true},
		}})
	}
	for i := range spec.Sources {
		src := &spec.Sources[i]
		kind := string(src.Kind())
		s3conn(sources.Index(i).Child(kind), src.S3Connection(), src.Name)
	}
	s3conn(sink.Child(string(spec.Sink.Kind())), spec.Sink.S3Connection(), "")
	names, steps := spec.JoinNames()
	for k, i := range steps {
		if st := spec.Transform[i].Join.Static; st != nil {
			p := field.NewPath("spec", "transform").Index(i).Child("join", "static", string(st.Kind()))
			s3conn(p, st.S3Connection(), names[k]) // the engine reads LOCKSTEP_<JOIN>_AWS_…
		}
	}
	if pg := spec.Sink.Postgres; pg != nil && pg.Connection.SecretName != "" {
		uses = append(uses, secretUse{field: sink.Child("postgres", "connection", "secretName"), secret: pg.Connection.SecretName, env: []secretEnv{
			{name: v1.PostgresDSNEnv, key: v1.PostgresDSNSecretKey},
		}})
	}
	if w := spec.Sink.Webhook; w != nil && w.HeadersSecretName != "" {
		uses = append(uses, secretUse{field: sink.Child("webhook", "headersSecretName"), secret: w.HeadersSecretName, dir: WebhookHeadersDir})
	}
	return uses
}

// absentSecret returns the first reference of q's spec (secretUses) to a Secret that does not
// exist in q's namespace, by the Secrets' metadata in c (the manager's cache, or the API);
// nil when every one exists. It reads only metadata: a Secret without its keys still shows
// only in the engine pod's state.
func absentSecret(ctx context.Context, c client.Reader, q *v1.StreamingQuery) (*secretUse, error) {
	seen := map[string]bool{}
	for _, u := range secretUses(q.Spec.DeepCopy()) {
		if seen[u.secret] {
			continue
		}
		seen[u.secret] = true
		version, err := secretVersion(ctx, c, q.Namespace, u.secret)
		if err != nil {
			return nil, err
		}
		if version == "" {
			return &u, nil
		}
	}
	return nil, nil
}

// absentSecretMessage says what a query waits for while the Secret of u is missing.
func absentSecretMessage(namespace string, u *secretUse) string {
	return fmt.Sprintf("Secret %s/%s, named by %s, does not exist: create it in the query's namespace; the engine runs once it does (one already running keeps what it started with)",
		namespace, u.secret, u.field)
}

// storeSecretUse is the store's credentials Secret, from the query's namespace: the S3 keys
// and an optional session token.
func storeSecretUse(store *v1.CheckpointStore) secretUse {
	return secretUse{field: field.NewPath("spec", "checkpoint", "store"), secret: store.Spec.CredentialsSecretName, env: []secretEnv{
		{name: EnvAccessKeyID, key: EnvAccessKeyID},
		{name: EnvSecretAccessKey, key: EnvSecretAccessKey},
		{name: EnvSessionToken, key: EnvSessionToken, optional: true},
	}}
}

// controllerEnv are the variables the controller sets on every engine; a Secret reference may
// not fill them.
var controllerEnv = []string{EnvAccessKeyID, EnvSecretAccessKey, EnvSessionToken, EnvRegion, EnvS3Endpoint, EnvS3InsecureSkipTLS, EnvCABundle}

// ValidateSecretRefs refuses the Secret references of a query that the controller cannot
// wire into the engine pod, each on the field that names it: a file field set together with
// the Secret that would fill it, a variable that two references fill from different Secrets
// or keys, a variable the controller sets itself, and a folder two Secrets would share.
func ValidateSecretRefs(q *v1.StreamingQuery) field.ErrorList {
	var errs field.ErrorList
	kafka := func(p *field.Path, t *v1.KafkaTLS) {
		if t == nil {
			return
		}
		if t.CASecretName != "" && t.CAFile != "" {
			errs = append(errs, field.Invalid(p.Child("tls", "caSecretName"), t.CASecretName,
				"caFile is set too: on Kubernetes the controller mounts caSecretName and sets caFile itself; set one of them"))
		}
		if t.ClientSecretName != "" && (t.CertFile != "" || t.KeyFile != "") {
			errs = append(errs, field.Invalid(p.Child("tls", "clientSecretName"), t.ClientSecretName,
				"certFile or keyFile is set too: on Kubernetes the controller mounts clientSecretName and sets both itself; set one or the other"))
		}
	}
	registry := func(p *field.Path, r *v1.SchemaRegistry) {
		if r != nil && r.CASecretName != "" && r.CAFile != "" {
			errs = append(errs, field.Invalid(p.Child("schemaRegistry", "caSecretName"), r.CASecretName,
				"caFile is set too: on Kubernetes the controller mounts caSecretName and sets caFile itself; set one of them"))
		}
	}
	for i := range q.Spec.Sources {
		if k := q.Spec.Sources[i].Kafka; k != nil {
			kafka(field.NewPath("spec", "sources").Index(i).Child("kafka"), k.TLS)
			registry(field.NewPath("spec", "sources").Index(i).Child("kafka"), k.SchemaRegistry)
		}
	}
	if k := q.Spec.Sink.Kafka; k != nil {
		kafka(field.NewPath("spec", "sink", "kafka"), k.TLS)
		registry(field.NewPath("spec", "sink", "kafka"), k.SchemaRegistry)
	}

	type filled struct {
		secret, key string
		by          *field.Path
	}
	env := map[string]filled{}
	dirs := map[string]string{}
	for _, u := range secretUses(q.Spec.DeepCopy()) {
		for _, e := range u.env {
			if slices.Contains(controllerEnv, e.name) {
				errs = append(errs, field.Invalid(u.field, u.secret,
					fmt.Sprintf("it would fill $%s, which the controller sets from the CheckpointStore: name another variable (usernameEnv, passwordEnv)", e.name)))
				continue
			}
			prev, ok := env[e.name]
			if !ok {
				env[e.name] = filled{secret: u.secret, key: e.key, by: u.field}
				continue
			}
			if prev.secret != u.secret || prev.key != e.key {
				errs = append(errs, field.Invalid(u.field, u.secret,
					fmt.Sprintf("$%s is already filled from key %s of Secret %s by %s: give this reference its own variables (usernameEnv, passwordEnv)",
						e.name, prev.key, prev.secret, prev.by)))
			}
		}
		if u.dir != "" {
			if prev, ok := dirs[u.dir]; ok && prev != u.secret {
				errs = append(errs, field.Invalid(u.field, u.secret, fmt.Sprintf("folder %s already holds Secret %s", u.dir, prev)))
			}
			dirs[u.dir] = u.secret
		}
	}
	return errs
}

// secretEnvVars returns the variables of uses, in order, each once.
func secretEnvVars(uses []secretUse) []corev1.EnvVar {
	var out []corev1.EnvVar
	seen := map[string]bool{}
	for _, u := range uses {
		for _, e := range u.env {
			if seen[e.name] {
				continue
			}
			seen[e.name] = true
			ref := secretKey(u.secret, e.key)
			if e.optional {
				ref.SecretKeyRef.Optional = ptr.To(true)
			}
			out = append(out, corev1.EnvVar{Name: e.name, ValueFrom: ref})
		}
	}
	return out
}

// secretVolumes returns the volumes and mounts of the Secrets of uses that are mounted, each
// folder once. The files are readable by the engine's group only (0440; the pod's fsGroup is
// the engine's group, so the kubelet gives the files to it).
func secretVolumes(uses []secretUse) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	seen := map[string]bool{}
	for _, u := range uses {
		if u.dir == "" || seen[u.dir] {
			continue
		}
		seen[u.dir] = true
		name := secretVolumeName(u.dir)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: u.secret, DefaultMode: ptr.To(int32(0o440)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: u.dir, ReadOnly: true})
	}
	return vols, mounts
}

// secretVolumeName is a volume name (a DNS label) for the folder dir: Secret names may be
// longer than a label and hold dots.
func secretVolumeName(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return "secret-" + hex.EncodeToString(h[:])[:12]
}
