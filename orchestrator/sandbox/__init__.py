"""Containing a command agent: it runs unprivileged, sees a read-only host with private scratch space and none of
the benchmark's state, and reaches only its gateway (plus, when allowed, an LLM endpoint).

A command agent is an untrusted program: the sandbox keeps it from the answers (scenario specs, ground truth, fault
state, other runs), from the machinery that scores it (the interpreter, the venv, the container storage) and from
the observability stack the gateway masks (Prometheus, Alertmanager, exporters on the host's loopback or the runs'
podman networks). The parts:

- namespaces (``unshare``): mount, pid (the agent sees and outlives none of the host's processes) and network;
- the user (``setpriv``): the ``opsbench-agent`` system user that roles/bootstrap_host creates (else
  ``nobody``), no capability, ``no_new_privs``; OpsBench running unprivileged keeps its own uid in a nested user
  namespace instead;
- files (files.py): read-only host, hidden and private directories, the agent's own directory read-write;
- network (network.py): slirp4netns and nftables; ``OPSBENCH_AGENT_NETWORK`` (``--agent-network``):
  ``egress`` (default), ``gateway``, ``host`` (no namespace); ``OPSBENCH_AGENT_ALLOW=host:port,...``.

``OPSBENCH_AGENT_SANDBOX``: ``auto`` (default: every part that works here, the rest recorded as missing),
``require`` (refuse to run an agent without every part), ``off``. What was in force is recorded in
``results.agent.isolation`` (``record``). ``OPSBENCH_AGENT_VISIBLE``: extra paths (``:``-separated) to show the
agent read-only, for an agent kept inside the project tree.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.sandbox import network
from orchestrator.sandbox.files import PRIVATE_SIZES, Keep, Plan, plan, program_path, storage_dirs
from orchestrator.sandbox.setup import SETUP, SETUP_FAILED, wrap

__all__ = ["MODES", "PRIVATE_SIZES", "SETUP", "SETUP_FAILED", "Keep", "Plan", "Prepared", "SandboxUnavailable",
           "agent_user", "mode", "plan", "prepare", "program_path", "storage_dirs", "unavailable_reason", "wrap"]
MODES = ("auto", "require", "off")
AGENT_USER = "opsbench-agent"


class SandboxUnavailable(RuntimeError):
    """The mode is ``require`` and the kernel or the tools do not allow a part of the sandbox."""


def mode(environ: Mapping[str, str] = os.environ) -> str:
    value = environ.get("OPSBENCH_AGENT_SANDBOX", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"OPSBENCH_AGENT_SANDBOX={value!r}: must be one of {', '.join(MODES)}")
    return value


@functools.cache
def unavailable_reason() -> str:
    """Empty when the namespaces work here; else why not (probed once per process)."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    probe = subprocess.run(["unshare", *user, "--mount", "--propagation", "private", "--pid", "--fork",
                            "--mount-proc", "--", "/bin/sh", "-c", "mount -t tmpfs probe /tmp"],
                           capture_output=True, text=True, check=False, timeout=30)
    if probe.returncode != 0:
        return f"namespaces are not allowed here ({probe.stderr.strip()[-200:] or probe.returncode})"
    return ""


def agent_user() -> tuple[str, int, int]:
    """(name, uid, gid) the agent runs as when OpsBench runs as root: the bootstrap role's user, else nobody."""
    for name in (AGENT_USER, "nobody"):
        try:
            entry = pwd.getpwnam(name)
            return name, entry.pw_uid, entry.pw_gid
        except KeyError:
            continue
    return "nobody", 65534, 65534


@dataclass
class Prepared:
    """A sandbox ready to start: ``argv`` to run, ``started(pid)`` right after, ``close()`` on every exit path."""

    argv: list[str]
    isolation: dict[str, Any]
    env_rewrite: set[int] = field(default_factory=set)
    scratch: Path | None = None
    log: Path | None = None
    net: network.Rules | None = None
    slirp: network.Slirp | None = None

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """The agent's environment, with allowed host-loopback URLs pointed at its network's host address."""
        return dict(network.rewrite(dict(env), self.env_rewrite)) if self.net else dict(env)

    def started(self, pid: int) -> None:
        if self.net is not None and self.log is not None:
            self.slirp = network.Slirp(pid, self.log)

    def close(self) -> None:
        if self.slirp is not None:
            self.slirp.stop()
            self.slirp = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _unsandboxed(command: str, reason: str) -> Prepared:
    return Prepared(["/bin/sh", "-c", command], {"sandbox": "none", "reason": reason})


def prepare(command: str, agent_dir: Path, environ: Mapping[str, str] = os.environ,
            secret_files: Iterable[Path] = ()) -> Prepared:
    """The sandbox for ``command`` as configured in ``environ``. Raises ``SandboxUnavailable`` when a part is
    required and cannot be had, ``ValueError`` on a bad setting."""
    how = mode(environ)
    net_mode = network.mode(environ)
    if how == "off":
        return _unsandboxed(command, "OPSBENCH_AGENT_SANDBOX=off")
    missing: list[str] = []
    reason = unavailable_reason()
    if reason:
        if how == "require":
            raise SandboxUnavailable(f"the agent sandbox cannot run here: {reason} (OPSBENCH_AGENT_SANDBOX=require)")
        return _unsandboxed(command, reason)
    privileged = os.geteuid() == 0
    if privileged:
        name, uid, gid = agent_user()
        user = {"name": name, "uid": uid, "gid": gid, "capabilities": [], "no_new_privs": True}
        if name != AGENT_USER:
            missing.append(f"user {AGENT_USER} does not exist (roles/bootstrap_host creates it): runs as {name}")
    else:
        name, uid, gid = pwd.getpwuid(os.getuid()).pw_name, os.getuid(), os.getgid()
        user = {"name": name, "uid": uid, "gid": gid, "capabilities": [], "no_new_privs": False,
                "note": "OpsBench runs unprivileged: the agent keeps its uid, in a nested user namespace"}
        missing.append("agent user: OpsBench is not root, so no other uid can be mapped")
    manifest_file = agent_dir / "manifest.json"
    manifest = json.loads(manifest_file.read_text()) if manifest_file.exists() else {}
    rules: network.Rules | None = None
    if net_mode != "host":
        net_reason = network.unavailable_reason()
        if net_reason:
            missing.append(f"network namespace: {net_reason}")
        else:
            rules = network.rules(net_mode, manifest, environ)
    if missing and how == "require":
        raise SandboxUnavailable(f"the agent sandbox cannot run here: {'; '.join(missing)} "
                                 "(OPSBENCH_AGENT_SANDBOX=require)")
    scratch = Path(tempfile.mkdtemp(prefix="opsbench-sandbox-"))
    try:
        stash, copies = scratch / "stash", scratch / "copies"
        stash.mkdir()
        copies.mkdir(mode=0o755)
        os.chmod(scratch, 0o755)
        the_plan = plan(agent_dir, environ, secret_files, command, copies if privileged else None)
        if rules is not None and manifest:
            rewritten = copies / "manifest.json"
            rewritten.write_text(json.dumps(network.rewrite(manifest, set(rules.host_ports)), indent=2))
            the_plan.keep.append(Keep(manifest_file.resolve(), "ro", rewritten))
        for path in copies.iterdir():
            path.chmod(0o644)
        if privileged:  # the agent's own directory is the one place it writes
            for path in (agent_dir, agent_dir / "workspace", *(agent_dir / "workspace").rglob("*")):
                os.chown(path, uid, gid, follow_symlinks=False)
        argv = wrap(command, the_plan, stash, agent_dir / "workspace", privileged=privileged, uid=uid, gid=gid,
                    ruleset=rules.nft() if rules else "")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    isolation = {
        "sandbox": "namespaces",
        "namespaces": ["mount", "pid", *(["network"] if rules else []), *([] if privileged else ["user"])],
        "user": user,
        "readonly": True,
        "hidden": [str(p) for p in the_plan.hide],
        "private": {str(p): size for p, size in the_plan.private},
        "visible": [f"{k.target} ({k.how})" for k in the_plan.keep],
        "masked": [str(p) for p in the_plan.mask],
        "network": rules.record() if rules else {"mode": "host", "reason": "OPSBENCH_AGENT_NETWORK=host"
                                                 if net_mode == "host" else "no network namespace"},
        "missing": missing,
    }
    return Prepared(argv, isolation, set(rules.host_ports) if rules else set(), scratch,
                    agent_dir.parent / "agent-network.log", rules)


def summary(isolation: Mapping[str, Any] | str) -> str:
    """One line for the terminal: the parts in force and what is missing."""
    if isinstance(isolation, str):  # runs recorded before the record was structured
        return isolation.split(";")[0]
    if isolation.get("sandbox") != "namespaces":
        return f"{isolation.get('sandbox')}: {isolation.get('reason', '')}".rstrip(": ")
    user = isolation.get("user", {})
    net = isolation.get("network", {})
    text = (f"namespaces ({', '.join(isolation.get('namespaces', []))}); user {user.get('name')} "
            f"({user.get('uid')}), no capabilities; read-only host, {len(isolation.get('hidden', []))} hidden; "
            f"network {net.get('mode')}")
    return text + (f"; missing: {'; '.join(isolation['missing'])}" if isolation.get("missing") else "")
