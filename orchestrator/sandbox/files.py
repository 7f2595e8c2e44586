"""What a command agent sees of the file system: the plan of hidden, private, kept and masked paths.

The host is read-only to the agent (every mount is remounted read-only in its mount namespace). On top of it:

- hidden (an empty read-only tmpfs over them): the project tree and the state directory (but for the agent's own
  directory and the files named below), every user's home, ``/root``, OpsBench's container storage and run root
  (read from the storage.conf ``roles/container_engine`` writes) and podman's default ones;
- private (an empty writable tmpfs, sizes in ``PRIVATE_SIZES``): ``/tmp``, ``/var/tmp``, ``/dev/shm`` and HOME;
- kept (bound back): the ``orchestrator`` package (baseline agents, MCP client), the virtualenv and the Python it
  was made from, the agent's directory (read-write), the paths its manifest names (token, kubeconfig) and the
  program its command runs, read-only; files the agent's uid could not read are shown as a copy it can;
- masked (an empty file bound over them): the orchestrator's key files and a scenario kept outside the project.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator import paths

KEY_FILE_VARIABLES = ("OPSBENCH_JUDGE_API_KEY_FILE", "OPSBENCH_AGENT_API_KEY_FILE")
INTERPRETER = re.compile(r"^(?:python[0-9.]*|bash|sh|dash|node|ruby|perl)$")
# Always hidden when present: homes, and the container engines' storage (OpsBench's and podman's defaults).
ALWAYS_HIDDEN = ("/home", "/root", "/var/lib/opsbench", "/run/opsbench", "/var/lib/containers", "/run/containers",
                 "/run/user", "/run/netns")
# tmpfs sizes: enough for pip caches and scratch files of an agent, bounded so it cannot fill the host's memory.
PRIVATE_SIZES = {"/tmp": "256m", "/var/tmp": "64m", "/dev/shm": "64m", "HOME": "64m"}


@dataclass
class Keep:
    """``target`` shows ``source`` (usually itself), ``rw`` or ``ro``."""

    target: Path
    how: str
    source: Path | None = None


@dataclass
class Plan:
    """What the agent sees: directories emptied, private scratch dirs, paths bound back, files masked."""

    hide: list[Path]
    keep: list[Keep]
    mask: list[Path] = field(default_factory=list)
    private: list[tuple[Path, str]] = field(default_factory=list)  # (path, tmpfs size)


def _inside(path: Path, roots: Iterable[Path]) -> bool:
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


def storage_dirs(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The container storage and run root of OpsBench's podman (``.opsbench/containers/storage.conf``, or the file
    CONTAINERS_STORAGE_CONF names): the containers' file systems, where faults change files."""
    found: list[Path] = []
    for conf in filter(None, [environ.get("CONTAINERS_STORAGE_CONF"),
                              str(paths.PROJECT_ROOT / ".opsbench" / "containers" / "storage.conf")]):
        try:
            storage = tomllib.loads(Path(conf).read_text()).get("storage", {})
        except (OSError, tomllib.TOMLDecodeError):
            continue
        found += [Path(storage[k]) for k in ("graphroot", "runroot") if isinstance(storage.get(k), str)]
    return found


def _homes(environ: Mapping[str, str]) -> list[Path]:
    """The invoking user's home (also through sudo) and HOME."""
    homes = [Path.home()]
    if environ.get("HOME"):
        homes.append(Path(environ["HOME"]))
    if environ.get("SUDO_USER"):
        homes.append(Path(os.path.expanduser(f"~{environ['SUDO_USER']}")))
    return homes


def _is_dir(path: Path) -> bool:
    """False also for a directory we may not look into: then the agent (our uid or less) may not either."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _outermost(dirs: Iterable[Path]) -> list[Path]:
    unique = sorted({d for d in dirs if _is_dir(d)})
    return [d for d in unique if not any(other in d.parents for other in unique)]


def plan(agent_dir: Path, environ: Mapping[str, str] = os.environ, secret_files: Iterable[Path] = (),
         command: str = "", copies: Path | None = None) -> Plan:
    """The sandbox for the agent whose directory (workspace, manifest, output) is ``agent_dir`` and whose command is
    ``command``. ``secret_files`` (the run's scenario and ground truth when they live outside the project) are
    masked wherever they are, even when the command names them. ``copies``: a directory to put readable copies of
    the files the manifest names in (the agent runs as another uid than their owner); None shows them as they are."""
    home = Path(environ.get("HOME") or Path.home()).resolve()
    private = [(Path(p).resolve() if p != "HOME" else home, size) for p, size in PRIVATE_SIZES.items()]
    private = [(p, size) for p, size in private if _is_dir(p) and p != Path("/")]
    venv_project = Path(sys.prefix).resolve().parent  # a checkout whose venv runs this one (a git worktree)
    hidden = [paths.PROJECT_ROOT.resolve(), paths.state_dir().resolve(),
              *([venv_project] if (venv_project / "scenario_specs").is_dir() else []),
              *(Path(p) for p in ALWAYS_HIDDEN), *(h.resolve() for h in _homes(environ)),
              *(p.resolve() for p in storage_dirs(environ))]
    private_dirs = [p for p, _ in private]
    hide = [h for h in _outermost(hidden) if h != Path("/") and not _inside(h, private_dirs)]
    covered = hide + [p for p, _ in private]
    keep: list[Keep] = [Keep(paths.PROJECT_ROOT.resolve() / "orchestrator", "ro")]
    if venv_project in hide and venv_project != paths.PROJECT_ROOT.resolve():
        keep.append(Keep(venv_project / "orchestrator", "ro"))  # what the venv's editable install imports
    for prefix in {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                   Path(os.path.realpath(sys.executable)).parent.parent}:
        if _inside(prefix, covered):
            keep.append(Keep(prefix, "ro"))
    keep.append(Keep(agent_dir.resolve(), "rw"))
    manifest = agent_dir / "manifest.json"
    named = _paths_in(json.loads(manifest.read_text())) if manifest.exists() else []
    extra = [p for p in environ.get("OPSBENCH_AGENT_VISIBLE", "").split(":") if p]
    mask = [Path(environ[v]).resolve() for v in KEY_FILE_VARIABLES if environ.get(v)]
    mask += [Path(f).resolve() for f in secret_files]
    for name in filter(None, [*named, program_path(command), *extra]):
        path = Path(name).resolve()
        if not path.exists() or path in mask or any(k.target == path for k in keep):
            continue
        if copies is not None and path.is_file() and name in named:
            copy = copies / f"{len(keep)}-{path.name}"
            shutil.copyfile(path, copy)
            keep.append(Keep(path, "ro", copy))  # the agent's uid cannot read a 0600 token of root's
        elif _inside(path, covered) and not any(path == k.target or k.target in path.parents for k in keep):
            keep.append(Keep(path, "ro"))
    keep = [k for k in keep if k.target not in mask]
    kept_dirs = [k.target for k in keep]
    return Plan(hide, keep, [m for m in mask if m.is_file() and (not _inside(m, covered) or _inside(m, kept_dirs))],
                private)
