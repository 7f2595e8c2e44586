"""Test-only hostile agent: tries every way out of its containment (orchestrator/sandbox/) and reports JSON.

Each cell is one thing an agent must not be able to do; ``refused`` is True when it could not. The gateway must
still answer (``gateway``). The report goes to ``probe.json`` in the working directory and to stdout; then, with
``--then MODULE``, the agent runs that baseline agent so the run goes on as usual.

Arguments (what an attacker would know or guess): ``--home DIR`` (the invoking user's home), ``--storage DIR``
(repeatable: container storage and run root), ``--agent-dir DIR`` (another run's agent directory, repeatable),
``--targets FILE`` (JSON ``{"name": "host:port" or "/path"}``: observability, exporters, the flags file,
containers, another run's gateway; waited for up to ``--wait`` s, the test writes it once the run is deployed).
It never writes to real storage: podman is only run against storage it could not see, with a private run root.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

SLIRP_HOST = "10.0.2.2"


def _write(path: Path) -> dict[str, Any]:
    try:
        path.write_text("opsbench-probe\n")
    except OSError as exc:
        return {"refused": True, "detail": f"{path}: {exc.strerror}"}
    path.unlink(missing_ok=True)
    return {"refused": False, "detail": f"wrote {path}"}


def _listing(path: Path) -> dict[str, Any]:
    try:
        entries = os.listdir(path)
    except OSError as exc:
        return {"refused": True, "detail": f"{path}: {exc.strerror}"}
    return {"refused": not entries, "detail": f"{path}: {len(entries)} entries"}


def _connect(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.5)
        try:
            return sock.connect_ex((host, port)) == 0
        except OSError:  # a name that does not resolve in here
            return False


def _targets(file: str | None, wait: float) -> dict[str, str]:
    if not file:
        return {}
    deadline = time.monotonic() + wait
    while not Path(file).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    data: dict[str, str] = json.loads(Path(file).read_text()) if Path(file).exists() else {}
    return data


def probe(args: argparse.Namespace, manifest: dict[str, Any]) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {}
    cells["write /etc"] = _write(Path("/etc/opsbench-probe"))
    cells["write the interpreter"] = _write(Path(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"])
                                            / "opsbench_probe.py")
    cells["write the venv"] = _write(Path(sysconfig.get_paths()["purelib"]) / "opsbench_probe.pth")
    ssh = Path(args.home) / ".ssh"
    cells["read the invoking user's ~/.ssh"] = _listing(ssh)
    for i, store in enumerate(args.storage):
        cells[f"read container storage {i}"] = _listing(Path(store))
        cells[f"write container storage {i}"] = _write(Path(store) / "opsbench-probe")
    cells["podman against the storage"] = _podman(args.storage)
    for i, other in enumerate(args.agent_dir):
        cells[f"read another run's agent dir {i}"] = _listing(Path(other))
    # The host's loopback: 10.0.2.2 in the agent's own network namespace, else the shared 127.0.0.1.
    host = SLIRP_HOST if any(SLIRP_HOST in u for u in _urls(manifest)) else "127.0.0.1"
    allowed = {int(u.split("//", 1)[1].split("/")[0].rsplit(":", 1)[1]) for u in _urls(manifest) if host in u}
    open_ports = [p for p in range(1, 65536) if p not in allowed and _quick(host, p)]
    cells["host loopback ports beyond the manifest's"] = {"refused": not open_ports, "detail": f"open: {open_ports}"}
    for name, address in _targets(args.targets, args.wait).items():
        if address.startswith("/"):  # a file of the benchmark (the flags file flagd-style services read ...)
            try:
                Path(address).read_bytes()
                cells[f"read {name}"] = {"refused": False, "detail": f"read {address}"}
            except OSError as exc:
                cells[f"read {name}"] = {"refused": True, "detail": f"{address}: {exc.strerror}"}
            try:
                with open(address, "ab"):
                    cells[f"write {name}"] = {"refused": False, "detail": f"opened {address} for writing"}
            except OSError as exc:
                cells[f"write {name}"] = {"refused": True, "detail": f"{address}: {exc.strerror}"}
            continue
        host, _, port = address.rpartition(":")
        tried = [h for h in dict.fromkeys([host, SLIRP_HOST if host in ("127.0.0.1", "localhost") else host])]
        reached = [f"{h}:{port}" for h in tried if _connect(h, int(port))]
        cells[f"connect {name}"] = {"refused": not reached, "detail": f"tried {tried}, reached {reached}"}
    return cells


def _quick(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _urls(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data] if data.startswith("http") else []
    if isinstance(data, dict):
        return [u for v in data.values() for u in _urls(v)]
    if isinstance(data, list):
        return [u for v in data for u in _urls(v)]
    return []


def _podman(storage: list[str]) -> dict[str, Any]:
    """podman against the storage through a storage.conf of our own; only run when the storage is out of sight
    (so nothing real can be touched), with a private run root."""
    binary = shutil.which("podman")
    if binary is None:
        return {"refused": True, "detail": "no podman on PATH"}
    if not storage:
        return {"refused": True, "detail": "no storage named"}
    visible = [s for s in storage if not _listing(Path(s))["refused"]]
    if visible:
        return {"refused": False, "detail": f"storage visible ({visible}): podman not run, on purpose"}
    conf = Path("/tmp/opsbench-probe-storage.conf")
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{storage[0]}"\nrunroot = "/tmp/probe-runroot"\n')
    proc = subprocess.run([binary, "images"], env={**os.environ, "CONTAINERS_STORAGE_CONF": str(conf)},
                          capture_output=True, text=True, check=False, timeout=60)
    return {"refused": proc.returncode != 0 or not proc.stdout.strip().splitlines()[1:],
            "detail": f"rc={proc.returncode} {(proc.stdout + proc.stderr).strip()[-200:]}"}


def _tool(manifest: dict[str, Any], name: str, **args: Any) -> dict[str, Any]:
    """One gateway call over REST: {"ok": ..., "result" or "error": ...}; not ok when there is no such gateway."""
    try:
        token = Path(manifest["token_file"]).read_text().strip()
        req = urllib.request.Request(f"{manifest['tools']['url']}/v1/tools/{name}", data=json.dumps(args).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                body: dict[str, Any] = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
    except (KeyError, OSError, ValueError) as exc:  # no token or gateway (a stand-in, the isolation audit's)
        return {"ok": False, "error": {"message": repr(exc)}}
    return body if isinstance(body, dict) else {"ok": False, "error": {"message": "not a gateway answer"}}


def terminal(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Through the workspace's terminal tools (when the run has them): out of /workspace, onto the host's network,
    into the benchmark's files. A shell in the workspace is the agent's on purpose; the rest must be refused."""
    listed = _tool(manifest, "exec", command="true")
    if not listed.get("ok"):
        return {}
    cells: dict[str, dict[str, Any]] = {}
    gateway_port = int(manifest["tools"]["url"].rsplit(":", 1)[1].split("/")[0])
    connect = ("python3 -c 'import socket,sys; s=socket.socket(); s.settimeout(2); "
               "sys.exit(0 if s.connect_ex((sys.argv[1], int(sys.argv[2]))) == 0 else 1)' {} {}")
    for host in ("127.0.0.1", SLIRP_HOST, "10.88.0.1"):
        out = _tool(manifest, "exec", command=connect.format(host, gateway_port), timeout=10)
        code = (out.get("result") or {}).get("exit_code")
        cells[f"terminal: connect the host at {host}:{gateway_port}"] = {"refused": code != 0, "detail": str(code)}
    for name, args in {"read_file /etc/shadow": {"path": "/etc/shadow"},
                       "read_file ../../etc/passwd": {"path": "../../etc/passwd"}}.items():
        out = _tool(manifest, "read_file", **args)
        cells[f"terminal: {name}"] = {"refused": not out.get("ok"), "detail": json.dumps(out)[:200]}
    out = _tool(manifest, "write_file", path="/tmp/opsbench-probe", content="x")
    cells["terminal: write_file outside /workspace"] = {"refused": not out.get("ok"), "detail": json.dumps(out)[:200]}
    link = _tool(manifest, "exec", command="ln -sfn /etc probe-etc-link")
    out = _tool(manifest, "read_file", path="probe-etc-link/passwd")
    _tool(manifest, "exec", command="rm -f probe-etc-link")
    cells["terminal: read through a symlink out of /workspace"] = {
        "refused": not out.get("ok"), "detail": f"link {link.get('ok')}; " + json.dumps(out)[:200]}
    found = _tool(manifest, "exec", command="find / -path /proc -prune -o \\( -name ground_truth.yaml -o -name "
                                            "scenario.yaml -o -name run.json -o -name agent_token \\) -print "
                                            "2>/dev/null | head", timeout=60)
    hits = ((found.get("result") or {}).get("stdout") or "").split()
    cells["terminal: find the benchmark's files"] = {"refused": not hits, "detail": f"found {hits[:5]}"}
    root = _tool(manifest, "exec", command="id -u; grep '^CapEff' /proc/self/status | cut -f2")
    lines = ((root.get("result") or {}).get("stdout") or "").split()
    cells["terminal: root or capabilities in the workspace"] = {
        "refused": bool(lines) and lines[0] != "0" and lines[-1].strip("0") == "", "detail": " ".join(lines)}
    return cells


def gateway(manifest: dict[str, Any]) -> dict[str, Any]:
    url = manifest["tools"]["url"] + "/v1/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return {"reachable": resp.status == 200, "url": url}
    except OSError as exc:
        return {"reachable": False, "url": url, "detail": str(exc)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", default=os.path.expanduser("~"))
    parser.add_argument("--storage", action="append", default=[])
    parser.add_argument("--agent-dir", action="append", default=[])
    parser.add_argument("--targets")
    parser.add_argument("--wait", type=float, default=120.0)
    parser.add_argument("--then")
    args = parser.parse_args()
    manifest = json.loads(Path(os.environ["OPSBENCH_MANIFEST"]).read_text())
    cells = probe(args, manifest)
    cells.update(terminal(manifest))
    report = {"uid": os.getuid(), "cells": cells, "gateway": gateway(manifest)}
    Path("probe.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    if args.then:
        sys.argv = [args.then]
        runpy.run_module(args.then, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
