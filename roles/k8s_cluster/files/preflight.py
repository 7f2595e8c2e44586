"""Preflight of `make cluster`: what the node needs from this host, checked before anything starts.

Usage: preflight.py ARGS_JSON. Prints one JSON object: the derived addresses (node IP, the API server's
service IP, the DNS address), the kernel settings to restore at down, and `errors`, one sentence each
naming what is missing and what to do; nothing on the host is changed (a probe cgroup is removed again).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def cgroup_errors(controllers: list[str]) -> tuple[str, list[str]]:
    """('v1'|'v2', errors): the controllers kubelet needs, mounted and writable by us (delegated)."""
    unified = (CGROUP / "cgroup.controllers").is_file()
    if unified:
        have = (CGROUP / "cgroup.controllers").read_text().split()
        needed = [c for c in ("cpu", "cpuset", "memory", "pids") if c not in have]
        if needed:
            return "v2", [f"no cgroup delegation: the cgroup v2 hierarchy at {CGROUP} does not offer the "
                          f"controllers {', '.join(needed)} (cgroup.controllers: {' '.join(have) or 'none'}); "
                          "kubelet needs cpu, cpuset, memory and pids delegated to it"]
        probes = [CGROUP]
    else:
        missing = [c for c in controllers if not (CGROUP / c / "cgroup.procs").is_file()]
        if missing:
            return "v1", [f"no cgroup support for kubelet: the cgroup v1 controllers {', '.join(missing)} are not "
                          f"mounted under {CGROUP} and no cgroup v2 hierarchy is there either"]
        probes = [CGROUP / c for c in controllers]
    errors = []
    for root in probes:
        probe = root / f"opsbench-preflight-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as exc:
            errors.append(f"no cgroup delegation: cannot create a cgroup under {root} ({exc.strerror}); kubelet "
                          "must create its kubepods hierarchy there (run as root on a host, or in a container "
                          "with a writable, delegated cgroup tree)")
    return ("v2" if unified else "v1"), errors


def port_errors(ports: dict[str, int], extra_host: str) -> list[str]:
    errors = []
    for name, port in sorted(ports.items(), key=lambda kv: kv[1]):
        hosts = ["0.0.0.0"] if name != "dns" else [extra_host]
        for host in hosts:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    owner = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True,
                                           text=True, check=False).stdout.strip()
                    errors.append(f"port {port} ({name.replace('_', ' ')}) is already in use"
                                  + (f" by: {' '.join(owner.split())}" if owner else "")
                                  + f"; stop that process or set k8s_cluster_ports.{name}")
            finally:
                sock.close()
    return errors


def host_routes() -> list[dict[str, str]]:
    out = subprocess.run(["ip", "-j", "route", "show", "table", "all"], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout or "[]"))


def network_errors(subnets: dict[str, str], bridge: str, podman_dirs: list[str]) -> list[str]:
    errors = []
    ours = {name: ipaddress.ip_network(net) for name, net in subnets.items()}
    if Path(f"/sys/class/net/{bridge}").exists():
        errors.append(f"the bridge {bridge} already exists: a previous cluster was not taken down; "
                      "run `make cluster-down` first")
    for route in host_routes():
        dst = route.get("dst", "")
        if dst in ("", "default") or ":" in dst or route.get("dev") == bridge:
            continue
        try:
            net = ipaddress.ip_network(dst if "/" in dst else dst + "/32", strict=False)
        except ValueError:
            continue
        for name, sub in ours.items():
            if net.overlaps(sub) and net.prefixlen > 0 and route.get("type", "unicast") == "unicast":
                errors.append(f"k8s_cluster_{name} {sub} overlaps the route {dst} via {route.get('dev', '?')}; "
                              f"choose another k8s_cluster_{name}")
    for folder in podman_dirs:
        for conf in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
            try:
                data = json.loads(conf.read_text())
            except (OSError, ValueError):
                continue
            for subnet in data.get("subnets", []) or []:
                try:
                    net = ipaddress.ip_network(subnet.get("subnet", ""), strict=False)
                except ValueError:
                    continue
                for name, sub in ours.items():
                    if net.version == sub.version and net.overlaps(sub):
                        errors.append(f"k8s_cluster_{name} {sub} overlaps podman network {data.get('name')} "
                                      f"({net}, {conf}); choose another k8s_cluster_{name}")
    return sorted(set(errors))


def node_ip(wanted: str) -> str:
    if wanted:
        return wanted
    out = subprocess.run(["ip", "-j", "route", "get", "192.0.2.255"], capture_output=True, text=True, check=False)
    try:
        return str(json.loads(out.stdout)[0]["prefsrc"])
    except (ValueError, IndexError, KeyError):
        return ""


def main() -> None:
    args = json.loads(sys.argv[1])
    flavour, errors = cgroup_errors(args["cgroup_controllers"])
    pod = ipaddress.ip_network(args["pod_subnet"])
    service = ipaddress.ip_network(args["service_subnet"])
    dns_ip = str(pod.network_address + 1)
    errors += port_errors(args["ports"], dns_ip)
    errors += network_errors({"pod_subnet": str(pod), "service_subnet": str(service)}, args["bridge"],
                             args["podman_network_dirs"])
    ip = node_ip(args["node_ip"])
    if not ip:
        errors.append("no node IP: the host has no default route to take an address from; set k8s_cluster_node_ip")
    sysctls = {}
    for key in args["sysctls"]:
        path = Path("/proc/sys") / key.replace(".", "/")
        if path.is_file():
            sysctls[key] = path.read_text().strip()
    print(json.dumps({"errors": errors, "cgroup": flavour, "node_ip": ip, "dns_ip": dns_ip,
                      "service_ip": str(service.network_address + 1), "sysctls": sysctls}))


if __name__ == "__main__":
    main()
