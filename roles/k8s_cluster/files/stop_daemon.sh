#!/bin/bash
# stop_daemon.sh RUN_DIR NAME: stop the daemon whose pid is in RUN_DIR/NAME.pid (TERM, then KILL after 20 s).
set -uo pipefail
pidf=$1/$2.pid
[ -s "$pidf" ] || exit 0
pid=$(cat "$pidf")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" && sleep 0.5
  echo "stopped $2"
fi
rm -f "$pidf"
