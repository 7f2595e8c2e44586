"""The per-run context every tool handler gets: endpoints, visible topology, telemetry, control, token, options.

Everything comes from the run directory the lifecycle already wrote: `environment.json` (what the environment
published at deploy) and `secrets/agent_token` (issued at handover, deleted at revoke). The gateway reads nothing
else of the run: not the scenario, not `state/`, not the ground truth.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.telemetry import TelemetryStore

from .control import ControlBackend, PodmanControl
from .errors import ToolError
from .scope import Scope

TOKEN_FILE = Path("secrets") / "agent_token"
GATEWAY_DIR = "gateway"


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
    run_dir: Path
    run_id: str
    environment: dict[str, Any]
    scope: Scope
    options: GatewayOptions = field(default_factory=GatewayOptions)
    control: ControlBackend | None = None
    telemetry_dir: Path | None = None
    clock: Callable[[], float] = time.time
    billing_file: Path | None = None
    """The FinOps billing database (DuckDB file inside the run dir), when the environment publishes one."""
    billing_table: str = "billing"
    billing_postgres: dict[str, Any] | None = None
    """The billing database in PostgreSQL (host, port, user, password_file inside the run dir), when the
    environment's billing store is `postgres`."""
    cost: dict[str, Any] | None = None
    """The cost-incident environment's `cost` section (policy, status and budget files inside the run dir; prices
    and requests), when the environment publishes one (roles/env_shop_finops)."""
    _store: TelemetryStore | None = field(default=None, init=False, repr=False)
    _billing: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

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

    def endpoint(self, name: str) -> str:
        """The URL the environment published for `name`; `not_supported` when it published none."""
        url = self.endpoints.get(name)
        if not url:
            raise ToolError("not_supported", f"this environment publishes no {name} endpoint")
        return url

    def store(self) -> TelemetryStore:
        """The run's telemetry query engine (one per gateway, shared by every thread)."""
        if self.telemetry_dir is None:
            raise ToolError("not_supported", "this environment records no logs or traces the gateway can query")
        with self._lock:
            if self._store is None:
                self._store = TelemetryStore(self.telemetry_dir)
            return self._store

    def billing(self) -> Any:
        """The run's read-only billing database (orchestrator.finops.sql.BillingDatabase), opened once."""
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

    @property
    def offered_families(self) -> set[str] | None:
        """Evidence families the environment offers (its `tool_families`), None when it does not say."""
        families = self.environment.get("tool_families")
        return {str(f) for f in families} if isinstance(families, list) else None

    def require_control(self) -> ControlBackend:
        if self.control is None:
            raise ToolError("not_supported", "this environment offers no control actions through the gateway")
        return self.control

    def current_token(self) -> str | None:
        """The agent's token as it is now: None once revoked (file deleted) or before handover."""
        try:
            token = self.token_file.read_text().strip()
        except OSError:
            return None
        return token or None

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._billing is not None:
                self._billing.close()
                self._billing = None


def _inside(run_dir: Path, value: Any) -> Path | None:
    """`value` as a path when it lies inside the run directory; None otherwise (the gateway serves no file
    outside the run)."""
    if not value:
        return None
    path = Path(str(value)).resolve()
    return path if path.is_relative_to(run_dir.resolve()) else None


def load_context(run_dir: Path, options: GatewayOptions | None = None, *, run_id: str | None = None,
                 control: ControlBackend | None = None) -> RunContext:
    """The context of the run in `run_dir`. Without an explicit `control`, a `local`-backend environment (one
    that publishes a container prefix) gets `PodmanControl`."""
    run_dir = Path(run_dir)
    try:
        environment = json.loads((run_dir / "environment.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {run_dir / 'environment.json'}: {exc}") from None
    run_id = run_id or run_dir.name
    ctl = environment.get("control") or {}
    prefix = str(ctl.get("container_prefix") or "")
    if control is None and prefix:
        control = PodmanControl(run_id, prefix, _inside(run_dir, ctl.get("flags_file")),
                                spec_file=run_dir / "env" / "containers.json")
    return RunContext(
        run_dir=run_dir,
        run_id=run_id,
        environment=environment,
        scope=Scope(environment.get("topology") or {}, prefix),
        options=options or GatewayOptions(),
        control=control,
        telemetry_dir=_inside(run_dir, environment.get("telemetry")),
        billing_file=_inside(run_dir, (environment.get("billing") or {}).get("database")),
        billing_postgres=_postgres_section(run_dir, environment.get("billing")),
        billing_table=str((environment.get("billing") or {}).get("table") or "billing"),
        cost=_cost_section(run_dir, environment.get("cost")),
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
