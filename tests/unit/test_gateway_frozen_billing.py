"""FinOps data analyses replay: the capture records the billing table the live gateway served (family `billing`,
`billing/<table>.parquet`), the frozen environment loads it into a read-only DuckDB file, and the SAME billing
tools (query_sql, describe_billing_schema) answer over the frozen source exactly as over the live one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from frozen_fixtures import token_for
from gateway_fixtures import NOW, Clock

from orchestrator.catalog import find_scenario
from orchestrator.finops.generator import DatasetSpec, generate
from orchestrator.finops.insights import resolve, series_sql
from orchestrator.gateway import Gateway, GatewayOptions, load_context
from orchestrator.gateway.evidence import FrozenEvidence, LiveEvidence
from orchestrator.harness.record import not_replayable
from orchestrator.snapshots import capture, frozen_env, leaks
from orchestrator.snapshots import format as fmt

SCENARIO = "finops-top-applications"
SPEC = DatasetSpec(resources=60, months=2)
"""Smaller than a scenario's dataset (400 resources, 3 months): the same code path in a fraction of the time."""


@dataclass
class Replay:
    live_dir: Path
    run_dir: Path
    snapshot: Path
    info: fmt.SnapshotInfo


def live_finops_run(root: Path) -> Path:
    """A run directory as roles/env_finops_data leaves it at handover: the dataset, environment.json, a manifest."""
    run_dir = root / "live"
    (run_dir / "env").mkdir(parents=True)
    database = run_dir / "env" / "billing.duckdb"
    generate(SPEC, database=database)
    database.chmod(0o444)
    (run_dir / "environment.json").write_text(json.dumps({
        "application": "finops_data", "endpoints": {}, "topology": {"entities": [{"id": "billing", "kind": "dataset"}]},
        "billing": {"database": str(database), "table": "billing", "format": "FOCUS", "store": "duckdb"},
        "tool_families": ["billing"]}))
    (run_dir / "agent").mkdir()
    (run_dir / "agent" / "manifest.json").write_text(json.dumps({
        "manifest_version": 1, "run": "r1", "tasks": [{"id": "top_applications", "kind": "analyze", "goal": "g"}],
        "alerts": [], "budget": {"wallClockSeconds": 120}, "token_file": str(run_dir / "secrets" / "agent_token"),
        "topology": {"entities": [{"id": "billing", "kind": "dataset"}]}}))
    token_for(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    root = tmp_path_factory.mktemp("frozen-billing")
    live_dir = live_finops_run(root)
    info = capture.capture(live_dir, root / "snap", scenario_id=SCENARIO, spec_version=1, raw_tsdb=None,
                           frozen_now=NOW)
    run_dir = root / "replay"
    run_dir.mkdir()
    frozen_env.deploy(info.path, run_dir, scenario=SCENARIO)
    token_for(run_dir)
    yield Replay(live_dir, run_dir, info.path, info)
    frozen_env.teardown(run_dir)


def gateway(run_dir: Path) -> Gateway:
    ctx = load_context(run_dir, GatewayOptions())
    ctx.clock = Clock(NOW)
    return Gateway(ctx)


def _answer(gw: Gateway, name: str, args: dict[str, Any]) -> str:
    """A tool's answer as the agent gets it, without the query's own duration (`seconds`: wall clock)."""
    body = gw.call(name, args).body()
    result = body.get("result")
    if isinstance(result, dict):
        result.pop("seconds", None)
    return json.dumps(body, sort_keys=True, default=str)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("describe_billing_schema", {}),
    ("query_sql", {"sql": resolve("top_applications", start="2024-08-01", end="2024-08-31", top=3)}),
    ("query_sql", {"sql": resolve("cost_by_category", start="2024-08-01", end="2024-08-31",
                                  categories=["Compute", "Storage"])}),
    ("query_sql", {"sql": resolve("discount_coverage", top=5)}),
    ("query_sql", {"sql": series_sql("Amazon Elastic Compute Cloud", "Hours")}),
    ("query_sql", {"sql": "SELECT * FROM billing", "limit": 7}),  # no ORDER BY: the stored order
    ("query_sql", {"sql": "SELECT ChargePeriodStart, Tags, BilledCost FROM billing", "limit": 1000}),
    ("query_sql", {"sql": "SELEC 1"}),  # lint: invalid
    ("query_sql", {"sql": "DELETE FROM billing"}),  # lint: invalid
    ("query_sql", {"sql": "SELECT * FROM read_csv('/etc/passwd')"}),  # denied by the connection
    ("query_sql", {"sql": "SELECT * FROM nosuch"}),
]


def test_snapshot_holds_the_billing_table_only(replay: Replay) -> None:
    info = fmt.verify(replay.snapshot)
    assert info.families == ("billing",)
    assert sorted(info.files) == ["billing/billing.parquet", "manifest.json"]
    assert info.data["environment"]["tool_families"] == ["billing"]
    assert info.files["billing/billing.parquet"]["size"] < 1_000_000
    # The ground truth's planted anomalies and answers are not in it (the data is; the truth is derived).
    scn = find_scenario(SCENARIO)
    assert leaks.find_strings(replay.snapshot, [*leaks.fault_strings(scn), "level_shift", "anomalies"]) == []


def test_billing_tools_answer_the_same_over_the_frozen_source(replay: Replay) -> None:
    live, frozen = gateway(replay.live_dir), gateway(replay.run_dir)
    assert isinstance(live.ctx.evidence, LiveEvidence) and isinstance(frozen.ctx.evidence, FrozenEvidence)
    assert [t.name for t in frozen.tools] == [t.name for t in live.tools] == ["query_sql", "describe_billing_schema"]
    for name, args in CALLS:
        assert _answer(frozen, name, args) == _answer(live, name, args), (name, args)
    # Paging: the same next_page tokens, and following one gives the same next rows.
    first = frozen.call("query_sql", {"sql": "SELECT ResourceId, BilledCost FROM billing", "limit": 50})
    assert first.ok and first.next_page
    again = live.call("query_sql", {"sql": "SELECT ResourceId, BilledCost FROM billing", "limit": 50})
    assert again.next_page == first.next_page
    args = {"sql": "SELECT ResourceId, BilledCost FROM billing", "limit": 50, "page": first.next_page}
    assert _answer(frozen, "query_sql", args) == _answer(live, "query_sql", args)
    refused = frozen.call("query_sql", {"sql": "SELECT * FROM read_csv('/etc/passwd')"})
    assert refused.error is not None and refused.error.code == "denied"


def test_the_frozen_database_is_read_only_and_inside_the_run(replay: Replay) -> None:
    env = json.loads((replay.run_dir / "environment.json").read_text())
    billing = env["frozen"]["billing"]
    database = Path(billing["database"])
    assert billing["table"] == "billing" and database.is_relative_to(replay.run_dir)
    assert database.stat().st_mode & 0o222 == 0
    assert env["tool_families"] == ["billing"]


def test_a_snapshot_without_billing_offers_no_billing_tools(tmp_path: Path) -> None:
    from snapshot_fixtures import make_snapshot

    info = make_snapshot(tmp_path / "snap")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    frozen_env.deploy(info.path, run_dir, scenario="shop-cart-down")
    try:
        gw = gateway(run_dir)
        assert "query_sql" not in [t.name for t in gw.tools]
        answer = gw.call("query_sql", {"sql": "SELECT 1"})
        assert answer.error is not None and "holds no billing evidence" in answer.error.message
    finally:
        frozen_env.teardown(run_dir)


def test_finops_analyses_are_recordable_postgres_and_mitigations_are_not() -> None:
    for ok in ("finops-top-applications", "finops-anomaly-ranking", "finops-discount-coverage"):
        assert not_replayable(find_scenario(ok)) is None, ok
    why = not_replayable(find_scenario("finops-top-applications-postgres"))
    assert why is not None and "postgres" in why
    mitigate = not_replayable(find_scenario("finops-cost-stale-budget"))
    assert mitigate is not None and "mitigate" in mitigate
