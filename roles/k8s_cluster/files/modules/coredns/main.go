// Command coredns is CoreDNS at a pinned release with only the plugins the cluster's DNS needs (the official
// main links every plugin, cloud DNS providers included). It serves cluster.local from the API server
// (plugin kubernetes, by kubeconfig) and forwards the rest to the host's resolvers.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The plugins in CoreDNS's own execution order (core/dnsserver/zdirectives.go), restricted to those linked.
var directives = []string{
	"reload", "bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop", "forward",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
