// Package e2e is Lockstep's end-to-end suite on a real single-node Kubernetes cluster
// (internal/testenv.RealNode: kubelet, containerd, kube-proxy, the control plane), with
// Lockstep installed as a user installs it: the lockstep image built from this checkout
// without Docker or a registry (internal/ociimage) and imported into containerd, the
// manifests of config/dev applied with kubectl, the controller running as a pod, and
// engines running as pods that read and write a real S3 server (versitygw) and a
// Kafka-protocol broker on the node's address.
//
// The tests need root and the node's tools (`make tools`). `make e2e` runs them;
// `make test` runs them after the other packages. See docs/development.md.
package e2e
