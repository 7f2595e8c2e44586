"""The frozen evidence source: one recorded snapshot, served as the live gateway served the incident at handover.

Alerts are `alerts.json` (Alertmanager's answer at handover, in get_alerts' item shape), PromQL goes to a frozen
Prometheus on a private copy of the snapshot's TSDB (roles/env_snapshot starts it), logs and traces are read by the
usual TelemetryStore from the snapshot's `telemetry/`, the topology is `topology.json`, list_services /
describe_service are the recorded answers in `services.json`, and the billing tools query the snapshot's billing
table (`billing/<table>.parquet`, loaded into a read-only DuckDB file at deploy) through the live run's
`BillingDatabase`. "Now" is the frozen now (handover time), so every
relative time and default window means what it meant live.

The incident is frozen: tools that act on the environment (restart, scale, toggle_flag, set_budget, ...) are not
offered, and nothing that was not recorded (cost) is either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import HTTP_STATUS, ToolError
from .base import EvidenceSource, Mode, ToolKind

if TYPE_CHECKING:
    from ..scope import Scope

ALERTS = "alerts.json"
TOPOLOGY = "topology.json"
SERVICES = "services.json"
# Snapshot families (orchestrator.snapshots.format.FAMILIES) that serve each tool family.
CHANGES = "changes.json"
BROWSER = "browser"
SERVING: dict[str, str] = {"alerts": "alerts", "metrics": "metrics", "logs": "logs", "traces": "traces",
                           "topology": "topology", "control": "services", "changes": "changes", "browser": "browser",
                           "billing": "billing"}


@dataclass(eq=False)
class FrozenEvidence(EvidenceSource):
    snapshot_id: str
    directory: Path
    """Where the snapshot's JSON files are (the run's copy)."""
    frozen_at: float
    families: tuple[str, ...]
    prometheus_base: str | None = None
    """The frozen Prometheus ('http://127.0.0.1:PORT'), when the snapshot holds metrics."""
    telemetry_dir: Path | None = None
    billing_file: Path | None = None
    """The snapshot's billing table loaded into a read-only DuckDB file (roles/env_snapshot), when it holds one."""
    billing_table: str = "billing"
    mode: ClassVar[Mode] = "frozen"
    _documents: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        EvidenceSource.__init__(self)

    @property
    def frozen_now(self) -> float | None:
        return self.frozen_at

    def offers(self, tool: ToolKind) -> bool:
        if tool.acts:
            return False
        family = SERVING.get(tool.family)
        return family is not None and family in self.families

    def refusal(self, tool: ToolKind) -> str | None:
        if tool.family == "terminal":
            return (f"tool {tool.name!r} is not available: this run replays a frozen incident (snapshot "
                    f"{self.snapshot_id}) and has no workspace; the terminal tools act in a live run's workspace")
        if tool.acts:
            return (f"tool {tool.name!r} acts on the live environment; this run replays a frozen incident "
                    f"(snapshot {self.snapshot_id}), where nothing can be changed")
        return f"tool {tool.name!r} is not available: snapshot {self.snapshot_id} holds no {tool.family} evidence"

    def _document(self, name: str, family: str) -> Any:
        if family not in self.families:
            raise ToolError("not_supported", f"snapshot {self.snapshot_id} holds no {family} evidence")
        with self._lock:
            if name not in self._documents:
                try:
                    self._documents[name] = json.loads((self.directory / name).read_text())
                except (OSError, ValueError) as exc:
                    raise ToolError("backend_error", f"snapshot {self.snapshot_id}: {name}: {exc}") from None
            return self._documents[name]

    def alerts(self) -> list[dict[str, Any]]:
        alerts = self._document(ALERTS, "alerts")
        if not isinstance(alerts, list):
            raise ToolError("backend_error", f"snapshot {self.snapshot_id}: {ALERTS} is not a list")
        return [dict(a) for a in alerts]

    def changes(self) -> list[dict[str, Any]]:
        entries = self._document(CHANGES, "changes")
        if not isinstance(entries, list):
            raise ToolError("backend_error", f"snapshot {self.snapshot_id}: {CHANGES} is not a list")
        return [dict(e) for e in entries]

    def browser_capture(self, since: float | None = None) -> Path | None:
        if "browser" not in self.families:
            raise ToolError("not_supported", f"snapshot {self.snapshot_id} holds no browser evidence")
        capture = self.directory / BROWSER
        return capture if (capture / "cuj.json").is_file() else None

    def billing(self) -> Any:
        if "billing" not in self.families or self.billing_file is None:
            raise ToolError("not_supported", f"snapshot {self.snapshot_id} holds no billing data")
        return super().billing()

    def prometheus_url(self) -> str:
        if "metrics" not in self.families or not self.prometheus_base:
            raise ToolError("not_supported", f"snapshot {self.snapshot_id} holds no metrics")
        return self.prometheus_base

    def topology(self, scope: Scope) -> dict[str, Any]:
        doc = self._document(TOPOLOGY, "topology")
        declared = doc.get("declared") if isinstance(doc, dict) else None
        return declared if isinstance(declared, dict) else scope.topology

    def list_services(self, scope: Scope) -> dict[str, Any]:
        doc = self._document(SERVICES, "services")
        answer = doc.get("list_services") if isinstance(doc, dict) else None
        if not isinstance(answer, dict):
            raise ToolError("backend_error", f"snapshot {self.snapshot_id}: {SERVICES} has no list_services answer")
        return answer

    def describe_service(self, service: str) -> dict[str, Any]:
        doc = self._document(SERVICES, "services")
        answer = (doc.get("describe_service") or {}).get(service) if isinstance(doc, dict) else None
        if not isinstance(answer, dict):
            raise ToolError("not_found", f"service: {service!r} was not recorded in snapshot {self.snapshot_id}",
                            field="service")
        error = answer.get("error")
        if isinstance(error, dict) and set(answer) == {"error"}:  # the live gateway refused it at handover
            code = error.get("code")
            raise ToolError(code if code in HTTP_STATUS else "backend_error", str(error.get("message", "")))
        return answer


def from_environment(run_dir: Path, section: dict[str, Any], inside: Any) -> FrozenEvidence:
    """The frozen source described by environment.json's `frozen` section (roles/env_snapshot writes it); `inside`
    maps a path to itself when it lies inside the run directory, else None (the gateway serves nothing outside)."""
    directory = inside(run_dir, section.get("dir"))
    if directory is None:
        raise ValueError(f"{run_dir / 'environment.json'}: frozen.dir must lie inside the run directory")
    billing: dict[str, Any] = section["billing"] if isinstance(section.get("billing"), dict) else {}
    return FrozenEvidence(
        snapshot_id=str(section.get("snapshot_id") or "?"),
        directory=directory,
        frozen_at=float(section["frozen_now"]),
        families=tuple(str(f) for f in section.get("families") or ()),
        prometheus_base=str(section["prometheus"]) if section.get("prometheus") else None,
        telemetry_dir=inside(run_dir, section.get("telemetry")),
        billing_file=inside(run_dir, billing.get("database")),
        billing_table=str(billing.get("table") or "billing"),
    )
