# Run inside the workspace container as the workspace user (POSIX sh, procps):
#   start BASE BAD MODE NAME... : the program (on stdin) becomes BASE/bin/<name> for every name; each one not
#                                 running yet starts in the background, BAD with profile MODE, the others steady;
#                                 waits until all run.
#   stop BASE NAME...           : kill every process running a program of BASE/bin (and its forked children), wait
#                                 until no process of these names is left (zombies reaped), delete their files.
set -u
cmd=$1
base=$2
shift 2

# Processes whose program is one of BASE/bin (the shebang makes them `/usr/bin/python3 BASE/bin/<name>`), with the
# children they forked; a zombie has no command line (it goes once its parent is killed).
ours() {
  pgrep -f "^/usr/bin/python3 $base/bin/"
}

named() {
  for n in "$@"; do pgrep -x "$n"; done
}

case $cmd in
start)
  bad=$1
  mode=$2
  shift 2
  mkdir -p "$base/bin" "$base/var"
  cat > "$base/bin/.program"
  for n in "$@"; do
    cp "$base/bin/.program" "$base/bin/$n"
    chmod 0755 "$base/bin/$n"
  done
  rm -f "$base/bin/.program"
  started=""
  for n in "$@"; do
    running=$(pgrep -x "$n" || true)
    [ -z "$running" ] || continue
    if [ "$n" = "$bad" ]; then profile="{\"mode\": \"$mode\"}"; else profile='{"mode": "steady"}'; fi
    printf '%s\n' "$profile" | setsid "$base/bin/$n" > /dev/null 2>&1 &
    started="$started $n"
  done
  i=0
  while [ $i -lt 100 ]; do
    missing=""
    for n in "$@"; do pgrep -x "$n" > /dev/null || missing="$missing $n"; done
    [ -n "$missing" ] || break
    i=$((i + 1))
    sleep 0.1
  done
  if [ -n "$missing" ]; then
    echo "not running after 10 s:$missing" >&2
    exit 1
  fi
  [ -z "$started" ] || echo "started$started"
  ;;
stop)
  i=0
  while [ $i -lt 100 ]; do
    pids=$(ours)
    left=$(named "$@")
    [ -n "$pids$left" ] || break
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2> /dev/null
    i=$((i + 1))
    sleep 0.1
  done
  if [ -n "$pids$left" ]; then
    echo "still running after 10 s: $(echo $pids $left)" >&2
    exit 1
  fi
  removed=""
  for n in "$@"; do
    if [ -e "/tmp/services/$n" ]; then rm -rf "/tmp/services/$n"; removed=1; fi
  done
  rmdir /tmp/services 2> /dev/null || true
  if [ -e "$base" ]; then rm -rf "$base"; removed=1; fi
  # The parents the start created (the image has no ~/.local), if nothing else is in them.
  rmdir "$(dirname "$base")" "$(dirname "$(dirname "$base")")" 2> /dev/null || true
  [ -z "$removed" ] || echo "removed"
  ;;
*)
  echo "usage: servicectl start|stop BASE ..." >&2
  exit 2
  ;;
esac
