"""The per-run context every tool handler gets: its evidence source (live or frozen), visible topology, token,
options and clocks.

Everything comes from the run directory the lifecycle already wrote: `environment.json` (what the environment
published at deploy; a `frozen` section makes it a replay of a snapshot) and `secrets/agent_token` (issued at
handover, deleted at revoke). The gateway reads nothing else of the run: not the scenario, not `state/`, not the
ground truth.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.telemetry import TelemetryStore

from .control import ControlBackend, PodmanControl
from .evidence import EvidenceSource, LiveEvidence
from .evidence.frozen import from_environment as frozen_from_environment
from .scope import Scope
from .workspace import PodmanWorkspace

TOKEN_FILE = Path("secrets") / "agent_token"
GATEWAY_DIR = "gateway"
BROWSER_DIR = "browser"
"""Browser captures: run_dir/browser/<capture>/ (roles/check_cuj writes them); the browser tools serve the latest
one inside the run's visible window, so a trial on a shared environment never sees an earlier trial's."""


@dataclass(frozen=True)
class GatewayOptions:
    """What the run grants the agent: a tool profile and budgets (None: unlimited)."""

    profile: str = "full"
    max_calls: int | None = None
    deadline: float | None = None
    """Unix time after which every call is refused."""
    hidden_families: tuple[str, ...] = ()
    """Evidence families the scenario masks (e.g. traces off): their tools are neither listed nor callable."""
    visible_since: float | None = None
    """Unix time before which the agent sees no telemetry: on a shared environment, when the previous trial had
    left it back at baseline, so an earlier trial's faults cannot stand in as evidence for this one."""


@dataclass
class RunContext:
    """One run as its gateway sees it. Tools read the world only through `evidence` (live or frozen, they never
    know which) and resolve relative times against `now()`; `clock` is the wall clock of budgets and the
    trajectory."""

    run_dir: Path
    run_id: str
    environment: dict[str, Any]
    scope: Scope
    evidence: EvidenceSource
    options: GatewayOptions = field(default_factory=GatewayOptions)
    clock: Callable[[], float] = time.time

    @property
    def endpoints(self) -> dict[str, str]:
        endpoints = self.environment.get("endpoints") or {}
        return {str(k): str(v) for k, v in endpoints.items()}

    @property
    def gateway_dir(self) -> Path:
        return self.run_dir / GATEWAY_DIR

    @property
    def token_file(self) -> Path:
        return self.run_dir / TOKEN_FILE

    @property
    def frozen(self) -> bool:
        return self.evidence.mode == "frozen"

    def now(self) -> float:
        """What "now" means for evidence: the frozen now of a replay, else the clock."""
        fixed = self.evidence.frozen_now
        return self.clock() if fixed is None else fixed

    # What the evidence source holds, for callers that look (capture, tests); tools go through the source.
    @property
    def control(self) -> ControlBackend | None:
        return self.evidence.control

    @property
    def workspace(self) -> PodmanWorkspace | None:
        return self.evidence.workspace

    @property
    def telemetry_dir(self) -> Path | None:
        return self.evidence.telemetry_dir

    @property
    def cost(self) -> dict[str, Any] | None:
        return self.evidence.cost

    @property
    def billing_file(self) -> Path | None:
        return self.evidence.billing_file

    @property
    def billing_postgres(self) -> dict[str, Any] | None:
        return self.evidence.billing_postgres

    @property
    def billing_table(self) -> str:
        return self.evidence.billing_table

    def store(self) -> TelemetryStore:
        return self.evidence.store()

    def billing(self) -> Any:
        return self.evidence.billing()

    def require_control(self) -> ControlBackend:
        return self.evidence.require_control()

    @property
    def offered_families(self) -> set[str] | None:
        """Evidence families the environment offers (its `tool_families`), None when it does not say."""
        families = self.environment.get("tool_families")
        return {str(f) for f in families} if isinstance(families, list) else None

    def current_token(self) -> str | None:
        """The agent's token as it is now: None once revoked (file deleted) or before handover."""
        try:
            token = self.token_file.read_text().strip()
        except OSError:
            return None
        return token or None

    def close(self) -> None:
        self.evidence.close()


def _inside(run_dir: Path, value: Any) -> Path | None:
    """`value` as a path when it lies inside the run directory; None otherwise (the gateway serves no file
    outside the run)."""
    if not value:
        return None
    path = Path(str(value)).resolve()
    return path if path.is_relative_to(run_dir.resolve()) else None


def load_context(run_dir: Path, options: GatewayOptions | None = None, *, run_id: str | None = None,
                 control: ControlBackend | None = None) -> RunContext:
    """The context of the run in `run_dir`: a frozen evidence source when environment.json has a `frozen` section
    (roles/env_snapshot), else the live one. Without an explicit `control`, a live `local`-backend environment (one
    that publishes a container prefix) gets `PodmanControl`."""
    run_dir = Path(run_dir)
    try:
        environment = json.loads((run_dir / "environment.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {run_dir / 'environment.json'}: {exc}") from None
    run_id = run_id or run_dir.name
    ctl = environment.get("control") or {}
    prefix = str(ctl.get("container_prefix") or "")
    evidence: EvidenceSource
    if isinstance(environment.get("frozen"), dict):
        evidence = frozen_from_environment(run_dir, environment["frozen"], _inside)
    else:
        if control is None and prefix:
            control = PodmanControl(run_id, prefix, _inside(run_dir, ctl.get("flags_file")),
                                    spec_file=run_dir / "env" / "containers.json")
        evidence = LiveEvidence(
            environment,
            control=control,
            telemetry_dir=_inside(run_dir, environment.get("telemetry")),
            billing_file=_inside(run_dir, (environment.get("billing") or {}).get("database")),
            billing_postgres=_postgres_section(run_dir, environment.get("billing")),
            billing_table=str((environment.get("billing") or {}).get("table") or "billing"),
            cost=_cost_section(run_dir, environment.get("cost")),
            changes_file=_inside(run_dir, environment.get("changes")),
            browser_dir=(run_dir / BROWSER_DIR) if isinstance(environment.get("browser"), dict) else None,
            workspace=PodmanWorkspace.from_environment(environment.get("workspace")),
        )
    return RunContext(
        run_dir=run_dir,
        run_id=run_id,
        environment=environment,
        scope=Scope(environment.get("topology") or {}, prefix),
        evidence=evidence,
        options=options or GatewayOptions(),
    )


def _postgres_section(run_dir: Path, billing: Any) -> dict[str, Any] | None:
    """The billing section's PostgreSQL connection when its store is `postgres` and its password file lies inside
    the run directory."""
    if not isinstance(billing, dict) or billing.get("store") != "postgres":
        return None
    password = _inside(run_dir, billing.get("password_file"))
    if password is None or not billing.get("port"):
        return None
    return {"host": billing.get("host") or "127.0.0.1", "port": billing["port"],
            "user": billing.get("user") or "billing_reader", "password_file": password}


def _cost_section(run_dir: Path, section: Any) -> dict[str, Any] | None:
    """The environment's `cost` section with its files checked to lie inside the run directory (None if any
    does not, or there is no section)."""
    if not isinstance(section, dict):
        return None
    files = {key: _inside(run_dir, section.get(key)) for key in ("policy_file", "status_file", "budget_file")}
    if any(v is None for v in files.values()):
        return None
    return {**section, **files}
