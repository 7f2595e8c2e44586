"""Where the project's files and the mutable state live.

The state dir (default ``<repo>/.opsbench``, override with ``OPSBENCH_HOME``) holds
Ansible's home and temp dirs, the runs directory and the SQLite index, so nothing is
written to ``~/.ansible`` or elsewhere in the user's home.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import OpsBenchError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PLAYBOOKS_DIR = PROJECT_ROOT / "playbooks"
ROLES_DIR = PROJECT_ROOT / "roles"
SPECS_DIR = PROJECT_ROOT / "scenario_specs"
INVENTORY = PROJECT_ROOT / "inventories" / "local" / "hosts.yml"
ANSIBLE_CFG = PROJECT_ROOT / "ansible.cfg"
SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"
ID_REGISTRY = SPECS_DIR / "REGISTRY.yaml"


def state_folder(path: Path) -> Path:
    """`path` (a folder of the state dir) created if missing; a path that is a file or cannot be created is an
    OpsBenchError naming it and OPSBENCH_HOME, never a traceback."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = ("it (or a folder above it) is a file, not a folder"
               if isinstance(exc, FileExistsError | NotADirectoryError) else f"cannot create it: {exc.strerror}")
        raise OpsBenchError(f"state folder {path}: {why}; set OPSBENCH_HOME to a folder OpsBench may write "
                            f"(now {os.environ.get('OPSBENCH_HOME', 'unset')})") from None
    return path


def state_dir() -> Path:
    """The project's state dir, created on first use."""
    return state_folder(Path(os.environ.get("OPSBENCH_HOME", PROJECT_ROOT / ".opsbench")).resolve())


def runs_dir() -> Path:
    return state_folder(state_dir() / "runs")


def containers_conf_dir() -> Path:
    """podman's containers.conf and storage.conf written by the container_engine role.

    Fixed per checkout (not per OPSBENCH_HOME): image storage is machine-wide and shared by
    every state dir, so its configuration must not depend on which state dir is in use.
    """
    return PROJECT_ROOT / ".opsbench" / "containers"


def ansible_home() -> Path:
    path = state_dir() / "ansible"
    state_folder(path / "tmp")
    return path
