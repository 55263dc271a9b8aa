package testenv

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// KillContainer kills the running container of a pod at once, through the container runtime
// (CRI StopContainer with no grace period: SIGKILL), as a crash or the OOM killer would: the
// pod stays, and the kubelet restarts the container in it by the pod's restart policy. It
// fails when the pod has no such running container.
func (n *Node) KillContainer(ctx context.Context, namespace, pod, container string) error {
	conn, err := grpc.NewClient("unix://"+n.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to containerd: %w", err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{
			"io.kubernetes.pod.namespace":  namespace,
			"io.kubernetes.pod.name":       pod,
			"io.kubernetes.container.name": container,
		},
	}})
	if err != nil {
		return fmt.Errorf("list the containers of pod %s/%s: %w", namespace, pod, err)
	}
	if len(list.Containers) == 0 {
		return fmt.Errorf("pod %s/%s has no running container %s", namespace, pod, container)
	}
	for _, c := range list.Containers {
		if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 0}); err != nil {
			return fmt.Errorf("kill container %s of pod %s/%s: %w", container, namespace, pod, err)
		}
	}
	return nil
}
