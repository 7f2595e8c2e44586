#!/bin/sh
# Work dirs of OpsBench image builds, safe against interrupted builds.
#   workdir.sh create ROOT PREFIX   make a temp dir below ROOT owned by this playbook run; print its path
#   workdir.sh remove ROOT DIR      remove DIR (below ROOT): kill processes chrooted into it, unmount
#                                   what is mounted below it (deepest first), then delete it without
#                                   crossing into a file system still mounted there
#   workdir.sh sweep ROOT           remove the dirs below ROOT whose playbook run is gone (killed,
#                                   interrupted); dirs without an owner only when older than an hour
# remove and sweep print "removed DIR" for each dir they removed.
set -eu

# Fields of /proc/PID/stat after "(comm)": 1 state, 2 ppid, 20 start time.
stat_field() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f"$2"; }

# "PID STARTTIME" of the outermost ansible-playbook process above this script (workers are
# forks of it with the same command line; the outermost one lives as long as the run).
owner() {
  pid=$$ found=""
  while [ "${pid:-0}" -gt 1 ]; do
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q ansible-playbook; then
      found="$pid $(stat_field "$pid" 20)"
    fi
    pid=$(stat_field "$pid" 2)
  done
  if [ -n "$found" ]; then echo "$found"; fi
}

alive() {  # alive PID STARTTIME
  [ -n "$1" ] && [ "$(stat_field "$1" 20)" = "$2" ]
}

remove() {  # remove ROOT DIR
  dir=$(realpath -m -- "$2")
  case "$dir" in
    "$1"/?*) ;;
    *) echo "refusing to remove $dir: not below $1" >&2; exit 2 ;;
  esac
  [ -e "$dir" ] || return 0
  for proc in /proc/[0-9]*; do
    proc_root=$(readlink "$proc/root" 2>/dev/null) || continue
    case "$proc_root" in
      "$dir" | "$dir"/*) kill -KILL "${proc#/proc/}" 2>/dev/null || true ;;
    esac
  done
  for mnt in $(awk -v p="$dir/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount --lazy "$mnt"
  done
  left=$(awk -v p="$dir/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts)
  if [ -n "$left" ]; then
    echo "not removing $dir: still mounted below it: $left" >&2
    exit 1
  fi
  rm -rf --one-file-system -- "$dir"
  echo "removed $dir"
}

[ $# -ge 2 ] || { echo "usage: $0 create|remove|sweep ROOT [PREFIX|DIR]" >&2; exit 2; }
cmd=$1
root=$(realpath -m -- "$2")
case "$cmd" in
  create)
    mkdir -p -m 0700 "$root"
    dir=$(mktemp -d "$root/${3:-build}-XXXXXXXX")
    owner > "$dir/.owner"
    echo "$dir"
    ;;
  remove)
    remove "$root" "$3"
    ;;
  sweep)
    [ -d "$root" ] || exit 0
    for dir in "$root"/*/; do
      [ -d "$dir" ] || continue
      dir=${dir%/}
      if [ -s "$dir/.owner" ]; then
        read -r pid start < "$dir/.owner" || true
        alive "${pid:-}" "${start:-}" && continue
      elif [ -z "$(find "$dir" -maxdepth 0 -mmin +60)" ]; then
        continue
      fi
      remove "$root" "$dir"
    done
    ;;
  *)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
