"""Keeping a command agent away from the answers: its own user, mount and pid namespaces.

A command agent runs as the orchestrator's user, so file permissions alone cannot keep it from reading the scenario
specs (ground truth), the fault roles, other runs' state or the gateway's trajectory log. Inside the sandbox:

- the project tree and the state directory are empty (a read-only tmpfs) except for what an agent needs: the
  ``orchestrator`` package (the baseline agents and the MCP client live there), the virtualenv when it is inside
  the project, the agent's own directory (read-write), the paths its manifest names (token, kubeconfig) and the
  program its command runs (``python3 /project/agents/mine.py``), read-only;
- the files the orchestrator's own keys live in (``OPSBENCH_JUDGE_API_KEY_FILE`` ...), and the run's scenario and
  ground truth when the spec lives outside the project, are replaced by empty ones;
- ``/proc`` shows only the agent's processes (no other process's environment or command line), and when the
  sandbox's first process ends every process the agent left behind dies with it;
- the network is the host's: the agent reaches the gateway (and only finds the endpoints its manifest lists).

The agent's command finally runs in a nested user namespace, in which every mount above is locked: it cannot
unmount the tmpfs to see what is below. Only ``unshare`` (util-linux) is needed, and no privilege where unprivileged
user namespaces are allowed (Debian and Fedora defaults). ``OPSBENCH_AGENT_SANDBOX``: ``auto`` (default: sandbox
when the kernel allows it, else run without and say so in the run's record), ``require`` (refuse to run an agent
unsandboxed), ``off``. ``OPSBENCH_AGENT_VISIBLE``: extra paths (``:``-separated) to show the agent read-only, for an
agent kept inside the project tree.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator import paths

MODES = ("auto", "require", "off")
KEY_FILE_VARIABLES = ("OPSBENCH_JUDGE_API_KEY_FILE", "OPSBENCH_AGENT_API_KEY_FILE")
# Run by the sandbox's first process (root of its own user namespace). Arguments: the uid and gid the agent keeps,
# an empty stash directory, the agent's working directory, then counted lists: hidden directories, kept paths
# (path, rw|ro), masked files; last the agent's command. Kept paths are bound aside into the stash before their
# parents are hidden, then moved back.
SETUP = r"""
set -eu
trap 'echo "opsbench-sandbox: setup failed (see above)" >&2; exit 125' EXIT
uid=$1 gid=$2 stash=$3 workdir=$4; shift 4
mount -t tmpfs -o size=64k,mode=0700 opsbench-stash "$stash"
nhide=$1; shift
i=0; while [ "$i" -lt "$nhide" ]; do eval "hide_$i=\$1"; shift; i=$((i+1)); done
nkeep=$1; shift
i=0
while [ "$i" -lt "$nkeep" ]; do
  if [ -d "$1" ]; then mkdir "$stash/$i"; else : > "$stash/$i"; fi
  mount --rbind "$1" "$stash/$i"
  eval "keep_$i=\$1; mode_$i=\$2"; shift 2; i=$((i+1))
done
i=0
while [ "$i" -lt "$nhide" ]; do
  eval "mount -t tmpfs -o size=64k,mode=0755 opsbench-hidden \"\$hide_$i\""; i=$((i+1))
done
i=0
while [ "$i" -lt "$nkeep" ]; do
  eval "path=\$keep_$i; how=\$mode_$i"
  if [ -d "$stash/$i" ]; then mkdir -p "$path"; else mkdir -p "$(dirname "$path")"; [ -e "$path" ] || : > "$path"; fi
  mount --move "$stash/$i" "$path"
  [ "$how" = rw ] || mount -o remount,bind,ro "$path"
  i=$((i+1))
done
nmask=$1; shift
i=0; while [ "$i" -lt "$nmask" ]; do mount --bind /dev/null "$1"; shift; i=$((i+1)); done
i=0; while [ "$i" -lt "$nhide" ]; do eval "mount -o remount,ro \"\$hide_$i\""; i=$((i+1)); done
umount "$stash"
cd "$workdir"
trap - EXIT
exec unshare --user --mount --map-user="$uid" --map-group="$gid" -- /bin/sh -c "$1"
"""


SETUP_FAILED = "opsbench-sandbox: setup failed"
INTERPRETER = re.compile(r"^(?:python[0-9.]*|bash|sh|dash|node|ruby|perl)$")


class SandboxUnavailable(RuntimeError):
    """The mode is ``require`` and the kernel or the tools do not allow the sandbox."""


@dataclass
class Plan:
    """What the agent sees: directories emptied, paths bound back (``rw`` or ``ro``), files masked."""

    hide: list[Path]
    keep: list[tuple[Path, str]]
    mask: list[Path] = field(default_factory=list)


def mode(environ: Mapping[str, str] = os.environ) -> str:
    value = environ.get("OPSBENCH_AGENT_SANDBOX", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"OPSBENCH_AGENT_SANDBOX={value!r}: must be one of {', '.join(MODES)}")
    return value


@functools.cache
def unavailable_reason() -> str:
    """Empty when the sandbox works here; else why not (probed once per process)."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--mount-proc",
                            "--", "/bin/sh", "-c", "mount -t tmpfs probe /tmp"],
                           capture_output=True, text=True, check=False, timeout=30)
    if probe.returncode != 0:
        return f"user namespaces are not allowed here ({probe.stderr.strip()[-200:] or probe.returncode})"
    return ""


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _paths_in(data: object) -> list[str]:
    """Every absolute path the manifest names (token, kubeconfig, output schemas ...): the agent was given them.
    The isolation audit checks that no manifest names a spec, ground truth or state path."""
    if isinstance(data, str):
        return [data] if data.startswith("/") and "\n" not in data else []
    if isinstance(data, dict):
        data = list(data.values())
    if isinstance(data, list):
        return [p for item in data for p in _paths_in(item)]
    return []


def program_path(command: str) -> str | None:
    """The file the agent's command runs, when named by an absolute path: ``/x/agent.sh ...``, or the script of an
    interpreter (``python3 /x/agent.py``). Whoever wrote the command (the operator, not the agent) chose to run it,
    so the sandbox shows it (read-only) even inside the project; files the command merely mentions stay hidden."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: /bin/sh will say so
        return None
    while words and "=" in words[0] and not words[0].startswith(("/", "=")):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return None
    if INTERPRETER.match(Path(words[0]).name):
        for word in words[1:]:
            if word in ("-m", "-c"):
                return None  # a module (found on sys.path) or inline code
            if not word.startswith("-"):
                return word if word.startswith("/") else None
        return None
    return words[0] if words[0].startswith("/") else None


def plan(agent_dir: Path, environ: Mapping[str, str] = os.environ, secret_files: Iterable[Path] = (),
         command: str = "") -> Plan:
    """The sandbox for the agent whose directory (workspace, manifest, output) is ``agent_dir`` and whose command is
    ``command``. ``secret_files`` (the run's scenario and ground truth when they live outside the project) are
    masked wherever they are, even when the command names them."""
    hide = sorted({paths.PROJECT_ROOT.resolve(), paths.state_dir().resolve()})
    hide = [h for h in hide if not any(other in h.parents for other in hide)]  # a state dir inside the project
    keep: list[tuple[Path, str]] = [(paths.PROJECT_ROOT.resolve() / "orchestrator", "ro")]
    prefix = Path(sys.prefix).resolve()
    if _inside(prefix, hide):
        keep.append((prefix, "ro"))
    keep.append((agent_dir.resolve(), "rw"))
    manifest = agent_dir / "manifest.json"
    named = _paths_in(json.loads(manifest.read_text())) if manifest.exists() else []
    extra = [p for p in environ.get("OPSBENCH_AGENT_VISIBLE", "").split(":") if p]
    for name in filter(None, [*named, program_path(command), *extra]):
        path = Path(name).resolve()
        if path.exists() and _inside(path, hide) and not any(path == k or k in path.parents for k, _ in keep):
            keep.append((path, "ro"))
    mask = [Path(environ[v]).resolve() for v in KEY_FILE_VARIABLES if environ.get(v)]
    mask += [Path(f).resolve() for f in secret_files]
    keep = [(k, how) for k, how in keep if k not in mask]
    kept_dirs = [k for k, _ in keep]
    return Plan(hide, keep, [m for m in mask if m.is_file() and (not _inside(m, hide) or _inside(m, kept_dirs))])


def wrap(command: str, sandbox: Plan, stash: Path, workdir: Path) -> list[str]:
    """The argv that runs ``command`` (through /bin/sh, in ``workdir``) inside ``sandbox``; ``stash``: an empty
    directory outside the hidden ones."""
    args = [str(os.getuid()), str(os.getgid()), str(stash), str(workdir.resolve()),
            str(len(sandbox.hide)), *map(str, sandbox.hide), str(len(sandbox.keep))]
    for path, how in sandbox.keep:
        args += [str(path), how]
    args += [str(len(sandbox.mask)), *map(str, sandbox.mask), command]
    return ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--pid", "--fork",
            "--kill-child", "--mount-proc", "--", "/bin/sh", "-c", SETUP, "opsbench-sandbox", *args]


def describe(sandbox: Plan) -> str:
    """One line for the run's record."""
    return (f"namespaces (user, mount, pid); hidden: {', '.join(map(str, sandbox.hide))}; visible: "
            f"{', '.join(f'{p} ({m})' for p, m in sandbox.keep)}"
            + (f"; masked: {', '.join(map(str, sandbox.mask))}" if sandbox.mask else ""))

