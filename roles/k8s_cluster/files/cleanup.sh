#!/bin/bash
# cleanup.sh RUN_DIR SOCK_DIR BRIDGE BIN_DIR NETWORK: after the daemons stopped, remove what the node left on the
# host: containerd shims of this cluster (found by their socket address), mounts under the run and socket
# dirs, the pod bridge, kube-proxy's nftables tables, kube-router's iptables rules, kube-router's ipsets and kubelet's cgroups.
# Prints one line per removal.
set -uo pipefail
export PATH=/usr/sbin:/sbin:/usr/bin:/bin:$PATH
run=$1 sock=$2 bridge=$3 bin=$4 net=$5

# Shims and their containers started by this cluster's containerd (its -address names our socket).
for pid in $(ps -eo pid=,args= | awk -v s="$sock/" 'index($0, "containerd-shim") && index($0, s) {print $1}'); do
  kill -KILL "$pid" 2>/dev/null && echo "killed shim $pid"
done

# Mounts (pod volumes, network namespaces, overlay rootfs, shm), deepest first.
for _ in 1 2 3; do
  mapfile -t mounts < <(awk -v r="$run/" -v s="$sock/" '{ if (index($5, r) == 1 || index($5, s) == 1 || $5 == substr(s, 1, length(s) - 1)) print $5 }' /proc/self/mountinfo | sort -r)
  [ ${#mounts[@]} -eq 0 ] && break
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; echo "unmounted $m"; done
done

if ip link show "$bridge" > /dev/null 2>&1; then
  ip link delete "$bridge" && echo "deleted bridge $bridge"
fi

if [ -n "$bin" ] && [ -x "$bin/kube" ] && { iptables-save 2>/dev/null | grep -q 'KUBE-' ||
    nft list table ip kube-proxy > /dev/null 2>&1 || nft list table ip6 kube-proxy > /dev/null 2>&1; }; then
  "$bin/kube" kube-proxy --cleanup > /dev/null 2>&1; echo "ran kube-proxy --cleanup"
fi
# kube-proxy's nftables tables, should --cleanup have left one.
for family in ip ip6; do
  if command -v nft > /dev/null && nft list table "$family" kube-proxy > /dev/null 2>&1; then
    nft delete table "$family" kube-proxy && echo "deleted nftables table $family kube-proxy"
  fi
done
# What kube-proxy --cleanup leaves (kubelet's own chains, canaries) and kube-router's network policy chains
# (KUBE-ROUTER-INPUT/FORWARD/OUTPUT, KUBE-NWPLCY-*, KUBE-POD-FW-*): every KUBE-* chain, jumps to it first.
# No other Kubernetes node runs on this host (make cluster refuses to start beside a running one).
for cmd in iptables ip6tables; do
  command -v "$cmd-save" > /dev/null || continue
  for table in filter nat mangle; do
    "$cmd-save" -t "$table" 2>/dev/null | grep -q '^:KUBE-' || continue
    "$cmd-save" -t "$table" | awk '/^-A / && / -j KUBE-/ && $2 !~ /^KUBE-/ {sub(/^-A /, ""); print}' |
      while read -r rule; do eval "$cmd -t $table -D $rule"; done
    for chain in $("$cmd-save" -t "$table" | awk -F'[: ]' '/^:KUBE-/ {print $2}'); do
      "$cmd" -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $("$cmd-save" -t "$table" | awk -F'[: ]' '/^:KUBE-/ {print $2}'); do
      "$cmd" -t "$table" -X "$chain" 2>/dev/null
    done
    echo "removed the KUBE-* chains of $cmd table $table"
  done
done

# kube-router's ipsets, once no rule refers to them: KUBE-SRC-*/KUBE-DST-* (inet6: when IPv6), and the TMP-<base32>
# sets of its atomic swaps should it have died mid-sync. Not `kube-router --cleanup-config`: in v2.1.0 its policy
# cleanup has no iptables handlers and removes nothing, then it flushes every IPVS service on the host and panics.
if command -v ipset > /dev/null; then
  for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-(SRC|DST)-|^TMP-[A-Z2-7]{16}$'); do
    ipset destroy "$set" 2>/dev/null && echo "destroyed ipset $set"
  done
fi

# kubelet's links in /var/log/containers (a fixed path) to the pod logs under the run dir.
for link in /var/log/containers/*.log; do
  [ -L "$link" ] || continue
  case "$(readlink "$link")" in "$run"/*) rm -f "$link" && echo "removed $link";; esac
done

# Masquerade rules the bridge plugin left when a pod's network could not be torn down (its comment names the network).
if iptables-save -t nat 2>/dev/null | grep -q "name: \"$net\""; then
  iptables-save -t nat | awk -v n="name: \"$net\"" 'index($0, n) && /^-A POSTROUTING/ {sub(/^-A /, ""); print}' |
    while read -r rule; do eval "iptables -t nat -D $rule" && echo "removed a masquerade rule of $net"; done
  for chain in $(iptables-save -t nat | awk -v n="name: \"$net\"" 'index($0, n) && /^-A CNI-/ {print $2}' | sort -u); do
    iptables -t nat -F "$chain"; iptables -t nat -X "$chain" && echo "removed chain $chain"
  done
fi

# kubelet's QoS hierarchy in every cgroup v1 controller (and v2, when unified): empty once the pods are gone.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/unified/kubepods; do
  [ -d "$root" ] || continue
  find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
  [ -d "$root" ] && echo "could not remove $root (processes left in it)" || echo "removed cgroup $root"
done
exit 0
