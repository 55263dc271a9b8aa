package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// sparkMaster is the Spark setting the controller's conf names the master by.
const sparkMaster = "spark.master"

// sparkUI is what a spark query's driver serves on its UI for the engine's port: the Spark
// settings that turn it on (none when the UI stays off) and the metrics option that adds
// what it serves to the query's metrics.
type sparkUI struct {
	conf    map[string]string
	metrics metrics.Option
}

// newSparkUI returns the UI of obj's driver on a free port of 127.0.0.1 (spark.MetricsConf).
func newSparkUI(obj *v1.StreamingQuery) (sparkUI, error) {
	port, err := spark.FreePort()
	if err != nil {
		return sparkUI{}, err
	}
	return sparkUI{
		conf:    spark.MetricsConf(port),
		metrics: metrics.WithGatherer(spark.NewMetrics(port, obj.Namespace, obj.Name)),
	}, nil
}

// newSparkEngine returns the driver of a spark query run by `lockstep engine`: the runner JVM
// as a child, as `lockstep run --runtime spark` starts it, with the controller's Kubernetes
// settings (cfg.sparkConf), the driver pod's name and IP, S3A pointed at the environment's
// S3 service, and uiConf (the driver's UI for the engine's /metrics) under them all. Spark's
// log goes to standard error, beside the engine's.
func newSparkEngine(obj *v1.StreamingQuery, cfg engineConfig, uiConf map[string]string, log *slog.Logger, obs engine.Observer) (engine.Runtime, error) {
	runner, err := spark.FindRunner()
	if err != nil {
		return nil, err
	}
	conf, master, err := sparkEngineConf(cfg.sparkConf, os.Getenv)
	if err != nil {
		return nil, err
	}
	for k, v := range uiConf {
		if _, set := conf[k]; !set {
			conf[k] = v
		}
	}
	return spark.New(obj, spark.Options{
		Runner:   runner,
		LogPath:  "/dev/stderr",
		Observer: obs,
		Stdout:   os.Stdout,
		Guard:    compatGuard(log),
		Adopt:    sparkAdoptGuard(log),
		Logger:   log,
		Master:   master,
		Conf:     conf,
	})
}

// sparkEngineConf returns the Spark settings of a driver: S3A's from the environment, the
// controller's file (path; none when empty) over them, and the driver's pod name and IP
// from the environment the controller's pod sets (controller.EnvPodName, EnvPodIP); and the
// master the file names, "" for local mode.
func sparkEngineConf(path string, getenv func(string) string) (map[string]string, string, error) {
	st, err := storeconn.Resolve(getenv, storeconn.From{})
	if err != nil {
		return nil, "", err
	}
	conf := spark.S3AConf(st)
	if path == "" {
		return conf, "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read the Spark settings: %w", err)
	}
	var file map[string]string
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, "", fmt.Errorf("read the Spark settings %s: %w", path, err)
	}
	master := inClusterMaster(file[sparkMaster], getenv)
	delete(file, sparkMaster)
	for k, v := range file {
		conf[k] = v
	}
	if name := getenv(controller.EnvPodName); name != "" {
		conf["spark.kubernetes.driver.pod.name"] = name
	}
	if ip := getenv(controller.EnvPodIP); ip != "" {
		conf["spark.driver.host"] = ip
	}
	return conf, master, nil
}

// inClusterMaster returns master with the API server's in-cluster name replaced by the address
// the kubelet gives every pod ($KUBERNETES_SERVICE_HOST, $KUBERNETES_SERVICE_PORT): a cluster
// without DNS for services (a bare node, the end-to-end suite's) still reaches it, as
// client-go's in-cluster configuration does.
func inClusterMaster(master string, getenv func(string) string) string {
	const inCluster = "k8s://https://kubernetes.default.svc"
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if master != inCluster || host == "" || port == "" {
		return master
	}
	return "k8s://https://" + net.JoinHostPort(host, port)
}
