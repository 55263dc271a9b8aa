package main

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine/spark"

	"github.com/lockstep-dev/lockstep/controller"
)

// TestSparkEngineConf: a driver's Spark settings are S3A's from the environment, the
// controller's file over them, and the pod's own name and IP; the master comes out of the
// file, and no file means local mode.
func TestSparkEngineConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spark-conf.json")
	if err := os.WriteFile(path, []byte(`{"spark.master":"k8s://https://kubernetes.default.svc","spark.executor.instances":"2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"LOCKSTEP_S3_ENDPOINT": "http://s3.test:7070", "AWS_REGION": "us-east-1",
		"AWS_SECRET_ACCESS_KEY": "not-a-setting", controller.EnvPodName: "q-engine-abc", controller.EnvPodIP: "10.1.2.3",
	}
	conf, master, err := sparkEngineConf(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if master != "k8s://https://kubernetes.default.svc" {
		t.Errorf("master = %q", master)
	}
	env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = "10.96.0.1", "443"
	if _, master, _ := sparkEngineConf(path, func(k string) string { return env[k] }); master != "k8s://https://10.96.0.1:443" {
		t.Errorf("master in a pod = %q, want the kubelet's address of the API server", master)
	}
	delete(env, "KUBERNETES_SERVICE_HOST")
	want := map[string]string{
		"spark.executor.instances":                   "2",
		"spark.kubernetes.driver.pod.name":           "q-engine-abc",
		"spark.driver.host":                          "10.1.2.3",
		"spark.hadoop.fs.s3a.endpoint":               "http://s3.test:7070",
		"spark.hadoop.fs.s3a.path.style.access":      "true",
		"spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
		"spark.hadoop.fs.s3a.endpoint.region":        "us-east-1",
	}
	// The S3A settings every s3:// location gets (engine/spark.S3AConf).
	for k, v := range spark.S3AConf(s3.Settings{}) {
		if _, ok := want[k]; !ok {
			want[k] = v
		}
	}
	if !maps.Equal(conf, want) {
		t.Errorf("conf = %v\nwant %v", conf, want)
	}
	if _, master, err := sparkEngineConf("", func(string) string { return "" }); err != nil || master != "" {
		t.Errorf("without a file: master %q, err %v; want local mode", master, err)
	}
}
