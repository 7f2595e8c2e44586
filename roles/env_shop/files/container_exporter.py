#!/usr/bin/env python3
"""Per-container resource metrics of one run, for its Prometheus (there is no cAdvisor here).

Serves /metrics on ADDR:PORT from `podman ps` and `podman stats` for the containers labelled
opsbench.run=RUN. Started on the host by env_shop's deploy (podman is not reachable from inside
the containers) and stopped by its teardown. Containers the deploy recorded in SPECS
(containers.json) but that do not exist, e.g. because their image could not be found, are
reported as not running, like a pod stuck in ImagePullBackOff. Helper containers of a fault
(label opsbench.fault) are not part of the application and are not reported.
Usage: container_exporter.py RUN ADDR PORT [SPECS]
"""

import json
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUN, ADDR, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
SPECS = sys.argv[4] if len(sys.argv) > 4 else None
UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
DURATION = re.compile(r"([\d.]+)(h|ms|us|µs|ns|m|s)")
SECONDS = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def size(text):
    m = re.match(r"([\d.]+)\s*([a-zA-Z]+)", text.strip())
    return float(m.group(1)) * UNITS.get(m.group(2).lower(), 1) if m else 0.0


def duration(text):
    return sum(float(n) * SECONDS[u] for n, u in DURATION.findall(text))


def podman_json(*args):
    proc = subprocess.run(["podman", *args, "--format", "json"], capture_output=True, text=True, timeout=20)
    return json.loads(proc.stdout or "[]") if proc.returncode == 0 else []


def expected():
    """Entity id -> service of every container the deploy recorded."""
    if not SPECS:
        return {}
    try:
        with open(SPECS) as fh:
            return {c["id"]: c.get("service", c["id"]) for c in json.load(fh)["containers"]}
    except (OSError, ValueError, KeyError):
        return {}


def render():
    containers = [c for c in podman_json("ps", "-a", "--filter", f"label=opsbench.run={RUN}")
                  if "opsbench.fault" not in (c.get("Labels") or {})]
    running = [c["Names"][0] for c in containers if c.get("State") == "running"]
    stats = {s["name"]: s for s in podman_json("stats", "--no-stream", *running)} if running else {}
    out = ["# TYPE container_running gauge", "# TYPE container_start_time_seconds gauge",
           "# TYPE container_memory_usage_bytes gauge", "# TYPE container_cpu_usage_seconds_total counter",
           "# TYPE container_pids gauge", "# TYPE container_exit_code gauge"]
    present = set()
    for c in containers:
        labels = c.get("Labels") or {}
        name = c["Names"][0]
        lab = f'container="{labels.get("opsbench.entity", name)}",service="{labels.get("opsbench.service", "")}"'
        present.add(labels.get("opsbench.entity", name))
        out.append(f"container_running{{{lab}}} {int(c.get('State') == 'running')}")
        if c.get("State") == "exited":
            out.append(f"container_exit_code{{{lab}}} {c.get('ExitCode', 0)}")
        out.append(f"container_start_time_seconds{{{lab}}} {c.get('StartedAt', 0)}")
        s = stats.get(name)
        if s:
            out.append(f"container_memory_usage_bytes{{{lab}}} {size(s['mem_usage'].split('/')[0])}")
            out.append(f"container_cpu_usage_seconds_total{{{lab}}} {duration(s['cpu_time'])}")
            out.append(f"container_pids{{{lab}}} {s.get('pids', 0)}")
    for entity, service in sorted(expected().items()):
        if entity not in present:
            out.append(f'container_running{{container="{entity}",service="{service}",reason="missing"}} 0')
    return "\n".join(out) + "\n"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = render().encode() if self.path == "/metrics" else b"see /metrics\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve():
    # The run network's bridge address may appear a moment after its first container starts.
    for _ in range(60):
        try:
            server = ThreadingHTTPServer((ADDR, PORT), Handler)
        except OSError:
            time.sleep(0.5)
            continue
        server.serve_forever()
    sys.exit(f"cannot listen on {ADDR}:{PORT}")


serve()
