"""The agent's own network namespace: slirp4netns for connectivity, nftables inside the namespace for the rules.

slirp4netns gives the namespace a user-mode network (tap0, 10.0.2.100) whose host address 10.0.2.2 is the host's
loopback. The agent's firewall (nft, in its namespace, set up before its command starts and out of its reach: it
has no capability) lets through:

- ``gateway``: 10.0.2.2 on the ports of the URLs its manifest names (the tool gateway, the application's entry
  points) and the ``OPSBENCH_AGENT_ALLOW`` entries; nothing else;
- ``egress`` (default): the same, plus any address that is not the host's: not its loopback, not its own
  addresses, not a network it is directly attached to (the runs' podman networks), not link-local.

The manifest the agent reads names 127.0.0.1; inside the namespace that is the agent's own loopback, so the
agent gets a copy with those URLs rewritten to 10.0.2.2 (and so are allowed host-loopback URLs in its
environment, e.g. an LLM server's ``OPSBENCH_LLM_BASE_URL``).

slirp4netns runs in a private mount namespace of its own: with ``--enable-sandbox`` in the host's mount namespace it
unmounts every netns under /run/netns (containers/libpod#4113), which breaks podman. It exits when the exit pipe
closes (the orchestrator died) and is killed when the agent ends, on every path.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("egress", "gateway", "host")
SLIRP_HOST = "10.0.2.2"
SLIRP_DNS = "10.0.2.3"
SLIRP_NET = "10.0.2.0/24"
LOOPBACK_URL = re.compile(r"(?P<scheme>https?://)(?:127\.0\.0\.1|localhost)(?::(?P<port>\d+))")
ALWAYS_BLOCKED = ("127.0.0.0/8", SLIRP_NET, "169.254.0.0/16", "224.0.0.0/4", "0.0.0.0/8")


def mode(environ: Mapping[str, str]) -> str:
    value = environ.get("OPSBENCH_AGENT_NETWORK", "egress").strip().lower() or "egress"
    if value not in MODES:
        raise ValueError(f"OPSBENCH_AGENT_NETWORK={value!r}: must be one of {', '.join(MODES)}")
    return value


def allow_list(environ: Mapping[str, str]) -> list[tuple[str, int]]:
    """``OPSBENCH_AGENT_ALLOW=host:port,...`` as (IPv4 address, port); hostnames are resolved now."""
    allowed = []
    for entry in filter(None, (e.strip() for e in environ.get("OPSBENCH_AGENT_ALLOW", "").split(","))):
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"OPSBENCH_AGENT_ALLOW: {entry!r} is not host:port")
        try:
            address = socket.gethostbyname(host)
        except OSError as exc:
            raise ValueError(f"OPSBENCH_AGENT_ALLOW: cannot resolve {host!r} ({exc})") from exc
        allowed.append((address, int(port)))
    return allowed


def unavailable_reason() -> str:
    """Empty when the agent can get a network namespace of its own here; else why not."""
    missing = [tool for tool in ("slirp4netns", "nft", "ip") if shutil.which(tool) is None]
    return f"not installed: {', '.join(missing)} (Debian: slirp4netns, nftables, iproute2)" if missing else ""


def _strings(data: Any, change: Any) -> Any:
    if isinstance(data, str):
        return change(data)
    if isinstance(data, dict):
        return {k: _strings(v, change) for k, v in data.items()}
    if isinstance(data, list):
        return [_strings(v, change) for v in data]
    return data


def manifest_ports(manifest: Mapping[str, Any]) -> set[int]:
    """Host-loopback ports of the URLs the manifest names: the gateway and the application's entry points."""
    ports: set[int] = set()

    def collect(text: str) -> str:
        ports.update(int(m["port"]) for m in LOOPBACK_URL.finditer(text))
        return text

    _strings(dict(manifest), collect)
    return ports


def rewrite(value: Any, ports: set[int]) -> Any:
    """``value`` (a manifest, an environment) with host-loopback URLs on ``ports`` pointed at slirp's host."""
    def change(text: str) -> str:
        return LOOPBACK_URL.sub(lambda m: f"{m['scheme']}{SLIRP_HOST}:{m['port']}" if int(m["port"]) in ports
                                else m.group(0), text)
    return _strings(value, change)


def host_networks() -> list[str]:
    """The host's own addresses and the networks it is directly attached to (podman bridges included)."""
    nets: set[str] = set()
    for args in (["-j", "-4", "addr"], ["-j", "-4", "route", "show", "scope", "link"]):
        out = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=10).stdout
        for item in json.loads(out or "[]"):
            for addr in item.get("addr_info", []):
                nets.add(f"{addr['local']}/32")
            if item.get("dst") and item["dst"] != "default":
                nets.add(str(ipaddress.ip_network(item["dst"], strict=False)))
    return sorted(nets)


@dataclass
class Rules:
    """What the agent's firewall lets through, for the run's record and for nft."""

    mode: str
    host_ports: list[int]  # on the host's loopback, through 10.0.2.2
    allowed: list[tuple[str, int]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # egress: the host's networks

    def nft(self) -> str:
        lines = ["table inet opsbench_agent {", " chain output {",
                 "  type filter hook output priority 0; policy drop;",
                 '  oifname "lo" accept', "  ct state established,related accept"]
        if self.host_ports:
            lines.append(f"  ip daddr {SLIRP_HOST} tcp dport {{ {', '.join(map(str, self.host_ports))} }} accept")
        for address, port in self.allowed:
            lines.append(f"  ip daddr {address} tcp dport {port} accept")
        if self.mode == "egress":
            lines += [f"  ip daddr {SLIRP_DNS} udp dport 53 accept", f"  ip daddr {SLIRP_DNS} tcp dport 53 accept",
                      f"  ip daddr {{ {', '.join([*ALWAYS_BLOCKED, *self.blocked])} }} meta l4proto tcp "
                      "reject with tcp reset",
                      f"  ip daddr {{ {', '.join([*ALWAYS_BLOCKED, *self.blocked])} }} reject",
                      "  meta nfproto ipv4 accept"]
        lines += ["  meta l4proto tcp reject with tcp reset", "  reject", " }", "}"]
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        return {"mode": self.mode, "tool": "slirp4netns + nftables", "host": SLIRP_HOST,
                "host_ports": self.host_ports, "allowed": [f"{a}:{p}" for a, p in self.allowed],
                "blocked": ["host loopback but the ports above", *self.blocked] if self.mode == "egress"
                else ["everything else"]}


def rules(how: str, manifest: Mapping[str, Any], environ: Mapping[str, str]) -> Rules:
    """The rules for an agent with ``manifest``: allowed loopback entries become 10.0.2.2 ports."""
    ports = manifest_ports(manifest)
    allowed = []
    for address, port in allow_list(environ):
        if ipaddress.ip_address(address).is_loopback:
            ports.add(port)
        else:
            allowed.append((address, port))
    return Rules(how, sorted(ports), allowed, host_networks() if how == "egress" else [])


class Slirp:
    """slirp4netns attached to the network namespace of ``pid``; ``stop`` on every exit path."""

    def __init__(self, pid: int, log: Path, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        own = os.readlink("/proc/self/ns/net")
        while True:  # unshare(2) may not have run yet in the fresh process
            try:
                if os.readlink(f"/proc/{pid}/ns/net") != own:
                    break
            except OSError as exc:
                raise RuntimeError(f"the agent's sandbox ended before its network was set up ({exc})") from exc
            if time.monotonic() > deadline:
                raise RuntimeError("the agent's sandbox never got a network namespace")
            time.sleep(0.01)
        exit_r, self._exit_w = os.pipe()
        ready_r, ready_w = os.pipe()
        if os.geteuid() == 0:  # never in the host's mount namespace (containers/libpod#4113)
            argv = ["unshare", "--mount", "--propagation", "private", "--", "slirp4netns", "--enable-sandbox"]
        else:  # the namespace belongs to the sandbox's user namespace; slirp4netns joins it (cannot unmount ours)
            argv = ["slirp4netns", f"--userns-path=/proc/{pid}/ns/user"]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*argv, "--configure", "--mtu=65520", "--enable-seccomp", f"--exit-fd={exit_r}",
                 f"--ready-fd={ready_w}", str(pid), "tap0"],
                pass_fds=(exit_r, ready_w), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)
        os.close(exit_r)
        os.close(ready_w)
        try:
            ready, _, _ = select.select([ready_r], [], [], max(0.1, deadline - time.monotonic()))
            if not ready or not os.read(ready_r, 1):
                self.stop()
                raise RuntimeError(f"slirp4netns did not come up (see {log})")
        finally:
            os.close(ready_r)

    def stop(self) -> None:
        if self._exit_w >= 0:
            os.close(self._exit_w)
            self._exit_w = -1
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
