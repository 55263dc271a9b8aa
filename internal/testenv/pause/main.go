// Command pause is the pod sandbox process of the e2e node (containerd's sandbox_image,
// packed by internal/ociimage): it holds the pod's namespaces, reaps the zombies it
// inherits, and exits on SIGTERM or SIGINT. The real node needs no image registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
