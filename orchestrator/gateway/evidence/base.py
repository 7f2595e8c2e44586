"""What every evidence source offers the gateway's tools: the one interface between the tools and the world.

A tool never asks where its evidence comes from. It asks the run's evidence source (`RunContext.evidence`) for
alerts, a Prometheus HTTP API answer, the telemetry store, the topology, the services' answers, billing or cost
data, and for the control backend when it acts. Two sources implement it:

* `LiveEvidence` (live.py): the running environment (Alertmanager, Prometheus, the telemetry files, podman);
* `FrozenEvidence` (frozen.py): a recorded snapshot (alerts.json, a frozen Prometheus on a private TSDB copy, the
  snapshot's telemetry, topology.json, services.json), with every relative time resolved against the frozen now.

A new evidence family (browser, terminal) adds one method here and its two implementations; its tools are written
once. What a source cannot serve raises `ToolError("not_supported")`, and `offers` keeps such tools out of the
listing in the first place.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from orchestrator.telemetry import TelemetryStore

from ..errors import ToolError
from ..httpjson import get_json

if TYPE_CHECKING:
    from ..control import ControlBackend
    from ..scope import Scope
    from ..workspace import PodmanWorkspace

Mode = Literal["live", "frozen"]


class ToolKind(Protocol):
    """What a source needs to know of a tool to say whether it serves it (tools.base.Tool has these)."""

    @property
    def name(self) -> str: ...

    @property
    def family(self) -> str: ...

    @property
    def acts(self) -> bool: ...


def read_changes(path: Path) -> list[dict[str, Any]]:
    """A change journal's entries; a missing journal has none, a malformed line is skipped (a writer may be
    appending it right now)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ToolError("backend_error", f"cannot read the change journal: {exc}") from None
    out: list[dict[str, Any]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("time"), int | float) and entry.get("id"):
            out.append(entry)
    return sorted(out, key=lambda e: (float(e["time"]), str(e["id"])))


def latest_capture(root: Path, since: float | None) -> Path | None:
    """The capture under `root` (one directory per capture, each with a cuj.json) that started last, at or after
    `since`; a capture still being written (no cuj.json yet) is not one."""
    best: tuple[float, str] | None = None
    try:
        children = list(root.iterdir())
    except OSError:
        return None
    for child in children:
        try:
            started = float(json.loads((child / "cuj.json").read_text()).get("started") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if (since is None or started >= since) and (best is None or (started, child.name) > best):
            best = (started, child.name)
    return root / best[1] if best else None


class EvidenceSource(ABC):
    """The world one run's gateway reads (see the module docstring). Thread-safe: the gateway serves calls
    concurrently, and the source opens its stores once."""

    mode: ClassVar[Mode]
    telemetry_dir: Path | None = None
    """Where the telemetry store reads logs and traces (TelemetryStore layout), None when there are none."""
    control: ControlBackend | None = None
    """The backend control tools act through; always None for a frozen source."""
    cost: dict[str, Any] | None = None
    billing_file: Path | None = None
    """The billing table's DuckDB file (live: the FinOps data environment's dataset; frozen: the snapshot's table
    loaded at deploy), None when there is none."""
    billing_postgres: dict[str, Any] | None = None
    billing_table: str = "billing"
    changes_file: Path | None = None
    """The environment's change journal (JSON lines: deploys, releases, flag switches), None when it keeps none."""
    browser_dir: Path | None = None
    """Where this run's browser captures are (orchestrator.cuj's capture layout), None when it has none."""
    workspace: PodmanWorkspace | None = None
    """The run's workspace container the terminal tools act in (DevOps tasks); always None for a frozen source."""

    def __init__(self) -> None:
        self._store: TelemetryStore | None = None
        self._billing: Any = None
        self._lock = threading.Lock()

    # -- time ---------------------------------------------------------------------------------------------------
    @property
    def frozen_now(self) -> float | None:
        """The time "now" means for evidence (relative times, default windows); None: the wall clock."""
        return None

    # -- which tools ----------------------------------------------------------------------------------------------
    @abstractmethod
    def offers(self, tool: ToolKind) -> bool:
        """Whether this source can serve `tool` at all (tools it cannot are neither listed nor callable)."""

    def refusal(self, tool: ToolKind) -> str | None:
        """Why a known tool that `offers` rejects is not available (the agent sees it with status `denied`);
        None: the gateway's usual answer (not in the run's profile)."""
        return None

    # -- evidence families ----------------------------------------------------------------------------------------
    @abstractmethod
    def alerts(self) -> list[dict[str, Any]]:
        """The active alerts in get_alerts' item shape (alertname, labels, annotations, startsAt, state,
        fingerprint), unfiltered and unsorted."""

    @abstractmethod
    def prometheus_url(self) -> str:
        """Base URL of the Prometheus whose HTTP API answers PromQL; `not_supported` when there is none."""

    def prometheus(self, path: str, params: Mapping[str, str] | None = None, *,
                   query_field: str | None = None) -> Any:
        """The decoded answer of one Prometheus HTTP API GET (a rejected query is `invalid` on `query_field`)."""
        return get_json(self.prometheus_url(), path, params, what="Prometheus", query_field=query_field)

    def label_values(self, label: str) -> list[str]:
        """Every value `label` takes in the Prometheus's series."""
        answer = self.prometheus(f"/api/v1/label/{label}/values", {})
        values = answer.get("data") if isinstance(answer, dict) else None
        return [str(v) for v in values] if isinstance(values, list) else []

    def store(self) -> TelemetryStore:
        """The logs and traces query engine (one per source, shared by every thread)."""
        if self.telemetry_dir is None:
            raise ToolError("not_supported", "this environment records no logs or traces the gateway can query")
        with self._lock:
            if self._store is None:
                self._store = TelemetryStore(self.telemetry_dir)
            return self._store

    @abstractmethod
    def topology(self, scope: Scope) -> dict[str, Any]:
        """The application's visible topology (entities and edges)."""

    @abstractmethod
    def list_services(self, scope: Scope) -> dict[str, Any]:
        """list_services' answer: {"services": [...visible services...], "feature_flags": [...] | None}."""

    @abstractmethod
    def describe_service(self, service: str) -> dict[str, Any]:
        """describe_service's answer for one visible service (already checked against the scope)."""

    def billing(self) -> Any:
        """The read-only billing database (orchestrator.finops.sql.BillingDatabase over `billing_file`, or its
        PostgreSQL twin over `billing_postgres`), opened once and shared by every thread."""
        if self.billing_file is None and self.billing_postgres is None:
            raise ToolError("not_supported", "this environment publishes no billing data")
        from orchestrator.finops.sql import BillingDatabase, SqlError

        with self._lock:
            if self._billing is None:
                try:
                    if self.billing_postgres is not None:
                        from orchestrator.finops.pgstore import PostgresBillingDatabase

                        pg = self.billing_postgres
                        self._billing = PostgresBillingDatabase(
                            str(pg["host"]), int(pg["port"]), str(pg["user"]),
                            Path(pg["password_file"]).read_text().strip())
                    else:
                        assert self.billing_file is not None
                        self._billing = BillingDatabase(self.billing_file)
                except SqlError as exc:
                    raise ToolError("backend_error", exc.message) from None
            return self._billing

    def changes(self) -> list[dict[str, Any]]:
        """The change journal's entries (id, time, service, kind, summary, source, details), oldest first."""
        if self.changes_file is None:
            raise ToolError("not_supported", "this environment keeps no change journal")
        return read_changes(self.changes_file)

    def browser_capture(self, since: float | None = None) -> Path | None:
        """The browser capture the tools serve: the latest under `browser_dir` that started at or after `since`
        (a capture directory holds cuj.json, orchestrator.cuj's index); None when there is none."""
        if self.browser_dir is None:
            raise ToolError("not_supported", "this environment has no pages a browser uses")
        return latest_capture(self.browser_dir, since)

    def require_workspace(self) -> PodmanWorkspace:
        """The workspace, or `not_supported` when this run has none."""
        if self.workspace is None:
            raise ToolError("not_supported", "this run has no workspace (the terminal tools act in a DevOps task's "
                            "workspace container)")
        return self.workspace

    def require_control(self) -> ControlBackend:
        """The control backend, or `not_supported` when this source cannot act."""
        if self.control is None:
            raise ToolError("not_supported", "this environment offers no control actions through the gateway")
        return self.control

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._billing is not None:
                self._billing.close()
                self._billing = None
