"""The topology an environment role declares (`roles/env_*/files/topology.yml`): its entities and call edges.

Its own module because the validator, the offline scorer and the scaffold all read it, and none of them should
have to import another for it.
"""

from __future__ import annotations

from typing import Any

from orchestrator.argspecs import role_dir
from orchestrator.spec import environment_role
from orchestrator.yamlfile import read_yaml


def load_topology(application: str, backend: str = "local",
                  args: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The topology an environment role declares in ``files/topology.yml`` (None if absent). With the scenario's
    environment `args`, the upstream projects a workspace deploys (env_workspace `upstream`) are added as its deploy
    publishes them (templates/upstream_topology.yml.j2): each project and its `-build` configuration."""
    topo_file = role_dir(environment_role(application, backend)) / "files" / "topology.yml"
    if not topo_file.is_file():
        return None
    data = read_yaml(topo_file)
    if not isinstance(data, dict):
        return None
    upstream = (args or {}).get("upstream")
    ids = [u["id"] for u in upstream if isinstance(u, dict) and isinstance(u.get("id"), str)] \
        if isinstance(upstream, list) else []
    if ids and isinstance(data.get("entities"), list) and isinstance(data.get("edges", []), list):
        data = {**data,
                "entities": [*data["entities"], *({"id": i, "kind": "project"} for i in ids),
                             *({"id": f"{i}-build", "kind": "config"} for i in ids)],
                "edges": [*data.get("edges", []), *({"source": "workspace", "target": i, "type": "owns"} for i in ids),
                          *({"source": i, "target": f"{i}-build", "type": "owns"} for i in ids)]}
    return data
