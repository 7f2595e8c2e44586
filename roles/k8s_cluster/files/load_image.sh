#!/bin/bash
# load_image.sh SOCKET WORKDIR IMAGE: copy IMAGE from podman's store into the node's containerd (namespace
# k8s.io, where the kubelet looks), unless containerd already holds that very build (label
# io.opsbench/podman-id). Prints "current", "loaded", or "missing" (exit 3: podman has no such image).
set -euo pipefail
sock=$1 work=$2 ref=$3
ctr=(ctr --address "$sock" --namespace k8s.io)
if ! id=$(podman image inspect --format '{{.Id}}' "$ref" 2>/dev/null); then
  echo "missing"; exit 3
fi
if "${ctr[@]}" images ls "name==$ref" | awk 'NR > 1' | grep -q "io.opsbench/podman-id=$id"; then
  echo "current"; exit 0
fi
archive=$(mktemp -p "$work" image.XXXXXX.tar)
trap 'rm -f "$archive"' EXIT
podman save --quiet --format docker-archive -o "$archive" "$ref"
"${ctr[@]}" images import --no-unpack=false "$archive" > /dev/null
"${ctr[@]}" images label "$ref" "io.opsbench/podman-id=$id" > /dev/null
echo "loaded"
