package controller_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
	"software.sslmate.com/src/go-pkcs12"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/controller"
)

// testCA returns a self-signed CA certificate and its PEM.
func testCA(t *testing.T) (*x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockstep test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestRenderStoreCABundle: a store's CA bundle reaches every process that talks to S3 from the
// one settings type: the engine's (and the driver's) environment names the mounted bundle; a
// spark query's executors get it as a trust store (S3A trusts only the JVM's), mounted beside
// the bundle and named by their JVM options ahead of the spec's own; the same bundle renders
// the same bytes, so that a reconcile does not roll the pods.
func TestRenderStoreCABundle(t *testing.T) {
	ca, caPEM := testCA(t)
	store := renderStore()
	store.Spec.S3.CABundle = caPEM
	s := controller.EngineSettings{Image: "ghcr.io/lockstep-dev/lockstep:v1.0.0", SparkImage: testSparkImage}

	builtin := securedQuery().Obj()
	cm, err := controller.RenderConfigMap(builtin, store, s)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[controller.CABundleKey] != string(caPEM) || cm.BinaryData != nil {
		t.Errorf("built-in query's ConfigMap: bundle %v, binary data %v; want the bundle and no trust store", cm.Data[controller.CABundleKey] != "", cm.BinaryData)
	}
	env := map[string]string{}
	for _, e := range controller.RenderPodTemplate(builtin, store, cm, s).Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for name, want := range map[string]string{
		controller.EnvCABundle:   controller.ConfigMountPath + "/" + controller.CABundleKey,
		controller.EnvRegion:     s3.DefaultRegion,
		controller.EnvS3Endpoint: store.Spec.S3.Endpoint,
	} {
		if env[name] != want {
			t.Errorf("engine $%s = %q, want %q", name, env[name], want)
		}
	}

	q := securedQuery().Edit(sparkPlacement).Edit(func(s *v1.StreamingQuerySpec) {
		s.Runtime.Spark.Conf = map[string]string{v1.SparkExecutorJavaOptions: "-XX:+UseG1GC"}
	}).Obj()
	cm, err = controller.RenderConfigMap(q, store, s)
	if err != nil {
		t.Fatal(err)
	}
	ts := cm.BinaryData[controller.TrustStoreKey]
	certs, err := pkcs12.DecodeTrustStore(ts, s3.TrustStorePassword)
	if err != nil {
		t.Fatalf("decode the trust store: %v", err)
	}
	if len(certs) == 0 || !certs[0].Equal(ca) {
		t.Errorf("the trust store does not hold the store's CA first (%d certificates)", len(certs))
	}
	again, err := controller.RenderConfigMap(q, store, s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.BinaryData[controller.TrustStoreKey], ts) {
		t.Error("rendering the same store twice gave two trust stores")
	}

	var conf map[string]string
	if err := json.Unmarshal([]byte(cm.Data[controller.SparkConfKey]), &conf); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(append(s3.JavaTrustOptions(controller.ConfigMountPath+"/"+controller.TrustStoreKey), "-XX:+UseG1GC"), " ")
	if got := conf[v1.SparkExecutorJavaOptions]; got != want {
		t.Errorf("%s = %q, want %q", v1.SparkExecutorJavaOptions, got, want)
	}
	var exec corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(cm.Data[controller.ExecutorPodKey]), &exec); err != nil {
		t.Fatal(err)
	}
	var items []string
	for _, v := range exec.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			for _, it := range v.ConfigMap.Items {
				items = append(items, it.Key)
			}
		}
	}
	if !slices.Contains(items, controller.TrustStoreKey) || !slices.Contains(items, controller.CABundleKey) {
		t.Errorf("executors mount %v of the ConfigMap, want the bundle and the trust store", items)
	}
}
