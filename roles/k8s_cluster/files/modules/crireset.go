package main

import (
	"context"
	"fmt"
	"os"
	"time"

	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// criReset stops and removes every pod sandbox of the container runtime at the CRI endpoint given as the only
// argument (what `crictl rmp --all --force` does): the runtime tears down each pod's containers, network
// (CNI DEL: veth, IP) and namespaces, so the node can stop with nothing left behind.
func criReset() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kube cri-reset unix:///path/to/containerd.sock")
		return 2
	}
	logger := klog.Background()
	service, err := remote.NewRemoteRuntimeService(os.Args[1], 10*time.Second, nil, &logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-reset: cannot reach the runtime at %s: %v\n", os.Args[1], err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sandboxes, err := service.ListPodSandbox(ctx, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-reset: listing the pod sandboxes of %s: %v\n", os.Args[1], err)
		return 1
	}
	failed := 0
	for _, sandbox := range sandboxes {
		name := sandbox.GetMetadata().GetNamespace() + "/" + sandbox.GetMetadata().GetName()
		if err := service.StopPodSandbox(ctx, sandbox.GetId()); err != nil {
			fmt.Fprintf(os.Stderr, "cri-reset: stopping pod %s: %v\n", name, err)
			failed++
			continue
		}
		if err := service.RemovePodSandbox(ctx, sandbox.GetId()); err != nil {
			fmt.Fprintf(os.Stderr, "cri-reset: removing pod %s: %v\n", name, err)
			failed++
		}
	}
	fmt.Printf("removed %d of %d pod sandboxes\n", len(sandboxes)-failed, len(sandboxes))
	if failed > 0 {
		return 1
	}
	return 0
}
