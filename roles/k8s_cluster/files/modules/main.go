// Command kube is OpsBench's multi-call build of one pinned Kubernetes release and the etcd it was released
// with: one binary, so the packages the control plane, the node and the client share compile and link once.
//
// The command runs by the name it is called as (a symlink kube-apiserver -> kube) or by its first argument
// (kube kube-apiserver --flags ...). Each entry is the official main of that command, unchanged.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // for CronJob time zones, as the official kube-apiserver and controller-manager mains

	"github.com/spf13/cobra"
	etcdmain "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func runCobra(command *cobra.Command) int { return cli.Run(command) }

var commands = map[string]func() int{
	"kube-apiserver":          func() int { return runCobra(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return runCobra(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return runCobra(scheduler.NewSchedulerCommand()) },
	"kubelet":                 func() int { return runCobra(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":              func() int { return runCobra(proxy.NewProxyCommand()) },
	"kubectl": func() int {
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
	"etcd":      func() int { etcdmain.Main(os.Args); return 0 },
	"cri-reset": criReset,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	run, ok := commands[name]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube COMMAND [flags], or call it by a symlink named COMMAND; commands: %v\n", names)
		os.Exit(2)
	}
	os.Exit(run())
}
