"""What the agent may see and act on: the application, never the benchmark's own machinery.

The environment's topology names everything that runs, including the load generator, Prometheus, Alertmanager, the
exporters and (by container name) the helper containers of faults. Those are how the benchmark observes and breaks
the application; an agent that could restart Prometheus or stop the load generator would change what is measured.
So the gateway shows the topology without them and refuses (status `denied`, logged) any argument that names one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ToolError, denied

INTERNAL_PREFIXES = ("loadgen", "prometheus", "alertmanager", "fault-", "opsbench")
INTERNAL_SUFFIXES = ("-exporter",)
INTERNAL_NAMES = frozenset({"runner", "orchestrator", "containers"})
"""Benchmark machinery by name: fault helper containers are `<prefix>fault-<fault>`, the container exporter's
Prometheus job is `containers`."""

APPLICATION_KINDS = frozenset({"service", "datastore"})
"""Entity kinds a tool can name as `service` (their instances are the containers)."""


def is_internal(name: str) -> bool:
    """True for names of the benchmark's machinery (see module docstring)."""
    low = name.strip().lower()
    return low in INTERNAL_NAMES or low.startswith(INTERNAL_PREFIXES) or low.endswith(INTERNAL_SUFFIXES)


def visible_topology(topology: Mapping[str, Any]) -> dict[str, Any]:
    """The topology without the machinery's entities and every edge that touches one."""
    entities = [e for e in topology.get("entities") or [] if not is_internal(str(e.get("id", "")))]
    kept = {str(e.get("id")) for e in entities}
    edges = [e for e in topology.get("edges") or []
             if str(e.get("source")) in kept and str(e.get("target")) in kept]
    return {**topology, "entities": entities, "edges": edges}


class Scope:
    """The application's services, from the visible topology, and the checks on arguments.

    `container_prefix` lets an agent name a container by its name (`ob-r1-cart-1`) as well as by its entity id
    (`cart-1`). Instances are checked by the control backend against the containers it finds (the topology file
    is static and may not list every replica).
    """

    def __init__(self, topology: Mapping[str, Any], container_prefix: str = "") -> None:
        self.topology = visible_topology(topology)
        # Machinery that writes telemetry (the load generator): its records are left out of log and trace searches.
        self.hidden_services = sorted({str(e.get(k)) for e in topology.get("entities") or [] for k in ("id", "service")
                                       if e.get(k) and is_internal(str(e.get(k)))})
        self.container_prefix = container_prefix
        self.services = sorted(str(e["id"]) for e in self.topology["entities"]
                               if "id" in e and e.get("kind") in APPLICATION_KINDS)

    def normalize(self, name: str) -> str:
        name = name.strip()
        if self.container_prefix and name.startswith(self.container_prefix):
            return name[len(self.container_prefix):]
        return name

    def refuse_internal(self, field: str, name: str) -> None:
        """Raise `denied` when `name` is part of the benchmark's machinery."""
        if is_internal(self.normalize(name)):
            raise denied(f"{field}: {name!r} is not part of the application (the benchmark's own machinery is "
                         "out of scope)", field=field)

    def service(self, field: str, name: str) -> str:
        """A service of the application named by `name`; `denied` for machinery, `not_found` for unknown names."""
        self.refuse_internal(field, name)
        name = self.normalize(name)
        if name in self.services:
            return name
        raise ToolError("not_found", f"{field}: no service {name!r}; services: {', '.join(self.services)}",
                        field=field)
