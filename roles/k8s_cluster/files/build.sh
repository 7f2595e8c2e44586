#!/bin/bash
# build.sh SOURCE_DIR OUT_DIR RELEASE GO: build the cluster's binaries into OUT_DIR (removed on failure).
# A copy of SOURCE_DIR is built, so another release than the pinned one can rewrite its go.mod.
set -euo pipefail
src=$1 out=$2 release=$3 go=$4
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
rm -rf "$out" && mkdir -p "$out/src"
trap 'rm -rf "$out"' ERR
cp -a "$src"/. "$out/src/"
cd "$out/src"
pinned=$("$go" list -m -f '{{.Version}}' k8s.io/kubernetes)
if [ "$release" != "$pinned" ]; then
  # The staging modules (k8s.io/api, ...) are published as v0.<minor>.<patch> of the same release.
  staging="v0.${release#v1.}"
  edits=(-require="k8s.io/kubernetes@$release")
  for m in $("$go" mod edit -json | python3 -c 'import json,sys; print(" ".join(r["Old"]["Path"] for r in json.load(sys.stdin)["Replace"] or []))'); do
    edits+=(-replace="$m=$m@$staging")
  done
  "$go" mod edit "${edits[@]}"
  nice -n 19 "$go" mod tidy
fi
minor=${release#v1.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version
ldflags="-s -w -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
ldflags+=" -X $cpkg.gitVersion=$release -X $cpkg.gitMajor=1 -X $cpkg.gitMinor=$minor -X $cpkg.gitTreeState=clean"
start=$(date +%s)
nice -n 19 "$go" build -tags providerless,dockerless -ldflags "$ldflags" -o "$out/kube" .
nice -n 19 "$go" build -ldflags "-s -w" -o "$out/pause" ./pause
(cd coredns && nice -n 19 "$go" build -ldflags "-s -w" -o "$out/coredns" .)
(cd ksm && nice -n 19 "$go" build -ldflags "-s -w" -o "$out/kube-state-metrics" k8s.io/kube-state-metrics/v2)
kr=$(cd kube-router && "$go" list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)
(cd kube-router && nice -n 19 "$go" build -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$kr" \
  -o "$out/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
end=$(date +%s)
for cmd in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  ln -sf kube "$out/$cmd"
done
etcd=$(cd "$out/src" && "$go" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
coredns=$(cd "$out/src/coredns" && "$go" list -m -f '{{.Version}}' github.com/coredns/coredns)
ksm=$(cd "$out/src/ksm" && "$go" list -m -f '{{.Version}}' k8s.io/kube-state-metrics/v2)
printf '{"release": "%s", "etcd": "%s", "coredns": "%s", "kube_state_metrics": "%s", "kube_router": "%s", "go": "%s", "build_seconds": %d}\n' \
  "$release" "$etcd" "$coredns" "$ksm" "$kr" "$("$go" env GOVERSION)" $((end - start)) > "$out/build.json"
rm -rf "$out/src"
echo "built $release in $((end - start)) s"
