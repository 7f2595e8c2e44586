#!/bin/bash
# build.sh SOURCE_DIR OUT_DIR VERSION GO: build Kyverno's five commands (admission controller `kyverno`, kyverno-init,
# background-, reports- and cleanup-controller) from the Go module in SOURCE_DIR (built from a copy) into OUT_DIR,
# with the host's CA bundle beside them (the images' build context) and build.json. OUT_DIR is removed on failure.
set -euo pipefail
src=$1 out=$2 version=$3 go=$4
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
rm -rf "$out" && mkdir -p "$out/src"
trap 'rm -rf "$out"' ERR
cp -a "$src"/. "$out/src/"
cd "$out/src"
cmds=()
for c in kyverno kyverno-init background-controller reports-controller cleanup-controller; do
  cmds+=("github.com/kyverno/kyverno/cmd/$c")
done
start=$(date +%s)
nice -n 19 "$go" build -ldflags "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=$version" -o "$out/" "${cmds[@]}"
end=$(date +%s)
cp /etc/ssl/certs/ca-certificates.crt "$out/ca-certificates.crt"
client_go=$("$go" list -m -f '{{.Version}}' k8s.io/client-go)
printf '{"version": "%s", "client_go": "%s", "go": "%s", "build_seconds": %d}\n' \
  "$version" "$client_go" "$("$go" env GOVERSION)" $((end - start)) > "$out/build.json"
cd / && rm -rf "$out/src"
echo "built Kyverno $version in $((end - start)) s"
