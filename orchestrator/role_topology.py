"""The topology an environment role declares (`roles/env_*/files/topology.yml`): its entities and call edges.

Its own module because the validator, the offline scorer and the scaffold all read it, and none of them should
have to import another for it.
"""

from __future__ import annotations

from typing import Any

from orchestrator.argspecs import role_dir
from orchestrator.spec import environment_role
from orchestrator.yamlfile import read_yaml


def load_topology(application: str, backend: str = "local") -> dict[str, Any] | None:
    """The topology an environment role declares in ``files/topology.yml`` (None if absent)."""
    topo_file = role_dir(environment_role(application, backend)) / "files" / "topology.yml"
    if not topo_file.is_file():
        return None
    data = read_yaml(topo_file)
    return data if isinstance(data, dict) else None
