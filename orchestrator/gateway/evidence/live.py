"""The live evidence source: the running environment as its deploy published it in environment.json.

Alerts come from the run's Alertmanager, PromQL from its Prometheus, logs and traces from its telemetry files,
services and actions from its control backend (podman, Kubernetes, a fake), billing and cost data from the files
and databases the environment names. This is what the gateway always did; the tools just reach it through the
`EvidenceSource` interface now.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ToolError
from ..httpjson import get_json
from .base import EvidenceSource, Mode, ToolKind

if TYPE_CHECKING:
    from ..control import ControlBackend
    from ..scope import Scope
    from ..workspace import PodmanWorkspace


@dataclass(eq=False)
class LiveEvidence(EvidenceSource):
    environment: dict[str, Any]
    control: ControlBackend | None = None
    telemetry_dir: Path | None = None
    billing_file: Path | None = None
    """The FinOps billing database (DuckDB file inside the run dir), when the environment publishes one."""
    billing_table: str = "billing"
    billing_postgres: dict[str, Any] | None = None
    """The billing database in PostgreSQL (host, port, user, password_file inside the run dir), when the
    environment's billing store is `postgres`."""
    cost: dict[str, Any] | None = None
    """The cost-incident environment's `cost` section (policy, status and budget files inside the run dir; prices
    and requests), when the environment publishes one (roles/env_shop_finops)."""
    changes_file: Path | None = None
    """The environment's change journal (environment.json `changes`), inside the run directory."""
    browser_dir: Path | None = None
    """The run's browser captures (run_dir/browser), when the environment has pages a browser uses."""
    workspace: PodmanWorkspace | None = None
    """The run's workspace container (environment.json `workspace`, roles/env_workspace), for the terminal tools."""
    mode: ClassVar[Mode] = "live"

    def __post_init__(self) -> None:
        EvidenceSource.__init__(self)

    def endpoint(self, name: str) -> str:
        """The URL the environment published for `name`; `not_supported` when it published none."""
        url = (self.environment.get("endpoints") or {}).get(name)
        if not url:
            raise ToolError("not_supported", f"this environment publishes no {name} endpoint")
        return str(url)

    def offers(self, tool: ToolKind) -> bool:
        """Billing tools exist only where the environment publishes billing data, cost tools only where it
        publishes a cost section (autoscaler policy, budgets), terminal tools only where it has a workspace; an
        environment that lists its `tool_families` (e.g. FinOps data: billing only) offers just those."""
        if tool.family == "terminal" and self.workspace is None:
            return False
        families = self.environment.get("tool_families")
        if isinstance(families, list):
            return tool.family in {str(f) for f in families}
        if tool.family == "changes":
            return self.changes_file is not None
        if tool.family == "browser":
            return self.browser_dir is not None
        if tool.family == "cost":
            return self.cost is not None
        return tool.family != "billing" or self.billing_file is not None or self.billing_postgres is not None

    def refusal(self, tool: ToolKind) -> str | None:
        if tool.family == "terminal" and self.workspace is None:
            return (f"tool {tool.name!r} is not available: this run has no workspace (the terminal tools act in a "
                    "DevOps task's workspace container)")
        return None

    def alerts(self) -> list[dict[str, Any]]:
        raw = get_json(self.endpoint("alertmanager"), "/api/v2/alerts",
                       {"active": "true", "silenced": "false", "inhibited": "false"}, what="Alertmanager")
        if not isinstance(raw, list):
            raise ToolError("backend_error", "Alertmanager answered an unexpected document")
        return [{
            "alertname": (alert.get("labels") or {}).get("alertname"),
            "labels": alert.get("labels") or {},
            "annotations": alert.get("annotations") or {},
            "startsAt": alert.get("startsAt"),
            "state": (alert.get("status") or {}).get("state"),
            "fingerprint": alert.get("fingerprint"),
        } for alert in raw]

    def prometheus_url(self) -> str:
        return self.endpoint("prometheus")

    def topology(self, scope: Scope) -> dict[str, Any]:
        return scope.topology

    def list_services(self, scope: Scope) -> dict[str, Any]:
        control = self.require_control()
        services = [s for s in control.list_services() if s.get("service") in scope.services]
        try:
            flags: list[str] | None = control.list_flags()
        except ToolError as exc:
            if exc.code != "not_supported":
                raise
            flags = None
        return {"services": services, "feature_flags": flags}

    def describe_service(self, service: str) -> dict[str, Any]:
        return self.require_control().describe_service(service)
