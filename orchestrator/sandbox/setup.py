"""The sandbox's setup script and the argv that runs it (``unshare``: mount, pid and, when asked, network namespaces).

The script runs as the sandbox's first process (real root, or root of its own user namespace when OpsBench runs
unprivileged), builds the agent's view of the file system (files.py), configures the network namespace
(network.py) and then ``exec``s the agent's command with no privilege left: as the agent user with no
capability and ``no_new_privs`` (``setpriv``), or, unprivileged, in a nested user namespace where every mount
above is locked.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.sandbox.files import Plan

SETUP_FAILED = "opsbench-sandbox: setup failed"
# Arguments: privileged (1: real root, drop to uid:gid with setpriv), uid, gid, stash (an empty directory), the
# agent's working directory, the nft ruleset ("" = no network namespace), then counted lists: hidden directories,
# private directories (path, size, mode), kept paths (source, target, rw|ro), masked files; last the command.
# Kept paths are bound into the stash before their parents are hidden, and moved back from it through the
# shell's working directory (the stash itself may be hidden by then, e.g. under /tmp).
SETUP = r"""
set -eu
trap 'echo "opsbench-sandbox: setup failed (see above)" >&2; exit 125' EXIT
privileged=$1 uid=$2 gid=$3 stash=$4 workdir=$5 ruleset=$6; shift 6
nhide=$1; shift
i=0; while [ "$i" -lt "$nhide" ]; do eval "hide_$i=\$1"; shift; i=$((i+1)); done
# 1. The host read-only: every mount (but /proc and /dev, whose files are not the host's storage, and those below
# a hidden directory) in this private mount namespace; remounting a bind read-only changes this mount only, never
# the host's.
mounts=$(cat /proc/self/mountinfo)
while read -r _ _ _ _ point opts _; do
  case "$point" in /proc|/proc/*|/dev|/dev/*|*\\*) continue;; esac
  under=0; i=0
  while [ "$i" -lt "$nhide" ]; do eval "h=\$hide_$i"; case "$point" in "$h"/*) under=1;; esac; i=$((i+1)); done
  [ "$under" = 0 ] || continue  # out of sight below a hidden directory anyway
  flags=ro
  IFS=,
  for o in $opts; do
    case "$o" in nosuid|nodev|noexec|relatime|noatime|nodiratime|strictatime) flags="$flags,$o";; esac
  done
  unset IFS
  # A mount the kernel will not remount (locked in a user namespace, some of /sys): fatal as root, where nothing
  # should refuse; else said on the agent's stderr.
  mount -n -o "remount,bind,$flags" "$point" 2>/dev/null || case "$privileged:$point" in
    *:/sys/*) ;;
    0:*) echo "opsbench-sandbox: warning: $point stays writable (the kernel refused to remount it)" >&2;;
    *) echo "opsbench-sandbox: cannot make $point read-only" >&2; exit 1;;
  esac
done <<EOF
$mounts
EOF
mount -n -t tmpfs -o size=64k,mode=0700 opsbench-stash "$stash"
cd "$stash"
nprivate=$1; shift
i=0; while [ "$i" -lt "$nprivate" ]; do eval "priv_$i=\$1 size_$i=\$2 pmode_$i=\$3"; shift 3; i=$((i+1)); done
nkeep=$1; shift
i=0
while [ "$i" -lt "$nkeep" ]; do
  if [ -d "$1" ]; then mkdir "$i"; else : > "$i"; fi
  mount -n --rbind "$1" "$i"
  eval "keep_$i=\$2; mode_$i=\$3"; shift 3; i=$((i+1))
done
i=0
while [ "$i" -lt "$nhide" ]; do
  eval "mount -n -t tmpfs -o size=64k,mode=0755 opsbench-hidden \"\$hide_$i\""; i=$((i+1))
done
i=0
while [ "$i" -lt "$nprivate" ]; do
  eval "path=\$priv_$i size=\$size_$i pmode=\$pmode_$i"
  mkdir -p "$path"
  if [ "$pmode" != home ]; then opts="mode=1777"
  elif [ "$privileged" = 1 ]; then opts="mode=0700,uid=$uid,gid=$gid"
  else opts="mode=0700,uid=0,gid=0"; fi  # the invoking user is root of the sandbox's user namespace
  mount -n -t tmpfs -o "size=$size,nosuid,nodev,$opts" opsbench-private "$path"
  i=$((i+1))
done
i=0
while [ "$i" -lt "$nkeep" ]; do
  eval "path=\$keep_$i; how=\$mode_$i"
  if [ -d "$i" ]; then mkdir -p "$path"; else mkdir -p "$(dirname "$path")"; [ -e "$path" ] || : > "$path"; fi
  mount -n --no-canonicalize --move "./$i" "$path"
  if [ "$how" = rw ]; then mount -n -o remount,bind,rw "$path"; else mount -n -o remount,bind,ro "$path"; fi
  i=$((i+1))
done
nmask=$1; shift
i=0; while [ "$i" -lt "$nmask" ]; do mount -n --bind /dev/null "$1"; shift; i=$((i+1)); done
i=0; while [ "$i" -lt "$nhide" ]; do eval "mount -n -o remount,bind,ro \"\$hide_$i\""; i=$((i+1)); done
# 2. The network: wait for slirp4netns (started from outside) to configure tap0, then the agent's firewall.
if [ -n "$ruleset" ]; then
  ip link set lo up
  n=0
  until ip -4 route show default 2>/dev/null | grep -q tap0; do
    n=$((n+1)); [ "$n" -lt 400 ] || { echo "opsbench-sandbox: no network from slirp4netns" >&2; exit 1; }
    sleep 0.025
  done
  printf '%s\n' "$ruleset" | nft -f -
fi
cd "$workdir"
trap - EXIT
# 3. No privilege left.
if [ "$privileged" = 1 ]; then
  exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
    -- /bin/sh -c "$1"
fi
exec unshare --user --mount --map-user="$uid" --map-group="$gid" -- /bin/sh -c "$1"
"""


def wrap(command: str, plan: Plan, stash: Path, workdir: Path, *, privileged: bool, uid: int, gid: int,
         ruleset: str = "") -> list[str]:
    """The argv that runs ``command`` (through /bin/sh, in ``workdir``) inside ``plan``; ``stash``: an empty
    directory; ``ruleset``: the agent's nftables rules, which also asks for a network namespace of its own."""
    home = os.environ.get("HOME", "")
    args = ["1" if privileged else "0", str(uid), str(gid), str(stash), str(workdir.resolve()), ruleset,
            str(len(plan.hide)), *map(str, plan.hide), str(len(plan.private))]
    for path, size in plan.private:
        args += [str(path), size, "home" if home and Path(home).resolve() == path else "shared"]
    args.append(str(len(plan.keep)))
    for keep in plan.keep:
        args += [str(keep.source or keep.target), str(keep.target), keep.how]
    args += [str(len(plan.mask)), *map(str, plan.mask), command]
    user = [] if privileged else ["--user", "--map-root-user"]
    net = ["--net"] if ruleset else []
    return ["unshare", *user, "--mount", "--propagation", "private", "--pid", *net, "--fork", "--kill-child",
            "--mount-proc", "--", "/bin/sh", "-c", SETUP, "opsbench-sandbox", *args]
