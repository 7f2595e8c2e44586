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


def with_upstream(topology: dict[str, Any] | None, args: Any) -> dict[str, Any] | None:
    """The topology with the upstream projects a workspace deploys (a scenario's environment args, env_workspace
    `upstream`) added as its deploy publishes them (templates/upstream_topology.yml.j2): each project and its
    `-build` configuration, owned by the workspace. Anything else is returned unchanged."""
    upstream = args.get("upstream") if isinstance(args, dict) else None
    ids = [u["id"] for u in upstream if isinstance(u, dict) and isinstance(u.get("id"), str)] \
        if isinstance(upstream, list) else []
    if not ids or topology is None or not isinstance(topology.get("entities"), list) \
            or not isinstance(topology.get("edges", []), list):
        return topology
    return {**topology,
            "entities": [*topology["entities"], *({"id": i, "kind": "project"} for i in ids),
                         *({"id": f"{i}-build", "kind": "config"} for i in ids)],
            "edges": [*topology.get("edges", []), *({"source": "workspace", "target": i, "type": "owns"} for i in ids),
                      *({"source": i, "target": f"{i}-build", "type": "owns"} for i in ids)]}
