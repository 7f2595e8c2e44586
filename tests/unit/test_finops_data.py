"""FinOps data: the generator's determinism, what the dataset holds, the reference detector, the read-only SQL tool."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from orchestrator.evaluation.finops import score_detection
from orchestrator.finops import insights
from orchestrator.finops.__main__ import main as finops_main
from orchestrator.finops.catalog import STREAMS
from orchestrator.finops.detect import Event, detect, importance, ranked
from orchestrator.finops.generator import DatasetSpec, generate, make_plan
from orchestrator.finops.sql import BillingDatabase, SqlError, lint

SMALL = DatasetSpec(seed=11, resources=150, months=2)

# FOCUS columns the dataset carries, and nothing else (no ground truth can hide in another column).
FOCUS_COLUMNS = {
    "BillingAccountId", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart",
    "ChargePeriodEnd", "ChargeCategory", "ChargeFrequency", "ChargeDescription", "BilledCost", "EffectiveCost",
    "ListCost", "ListUnitPrice", "PricingQuantity", "PricingUnit", "ConsumedQuantity", "ConsumedUnit",
    "PricingCategory", "CommitmentDiscountId", "ProviderName", "PublisherName", "InvoiceIssuerName", "ServiceName",
    "ServiceCategory", "SubAccountId", "SubAccountName", "RegionId", "ResourceId", "ResourceType", "Tags",
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """The default scenario dataset (seed 7, 400 resources, 3 months) as a DuckDB file, with its ground truth."""
    db = tmp_path_factory.mktemp("finops") / "billing.duckdb"
    summary = generate(DatasetSpec(), database=db)
    return db, summary


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a = generate(SMALL, parquet=tmp_path / "a.parquet")
    b = generate(SMALL, parquet=tmp_path / "b.parquet", threads=1)
    c = generate(DatasetSpec(seed=12, resources=150, months=2), parquet=tmp_path / "c.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert a["sha256"] == b["sha256"] == _sha(tmp_path / "a.parquet")
    assert a["anomalies"] == b["anomalies"]
    assert c["sha256"] != a["sha256"]
    assert c["anomalies"] != a["anomalies"]


def test_plan_is_a_pure_function_of_the_spec() -> None:
    assert make_plan(SMALL).anomalies == make_plan(SMALL).anomalies
    assert [r.resource_id for r in make_plan(SMALL).resources] == [r.resource_id for r in make_plan(SMALL).resources]


def test_dataset_has_focus_columns_only_and_the_expected_shape(dataset: tuple[Path, dict[str, object]]) -> None:
    db, summary = dataset
    con = duckdb.connect(str(db), read_only=True)
    cols = {c for (c,) in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'billing'").fetchall()}
    assert cols == FOCUS_COLUMNS
    spec = DatasetSpec()
    (usage,) = con.execute("SELECT count(*) FROM billing WHERE ChargeCategory = 'Usage'").fetchone() or (0,)
    assert usage == spec.resources * spec.days
    categories = dict(con.execute("SELECT ChargeCategory, min(BilledCost) FROM billing GROUP BY 1").fetchall())
    assert set(categories) == {"Usage", "Tax", "Credit"}
    assert categories["Credit"] < 0 <= categories["Usage"]
    providers = {p for (p,) in con.execute("SELECT DISTINCT ProviderName FROM billing").fetchall()}
    assert providers == {"AWS", "Microsoft", "Google Cloud"}
    (accounts,) = con.execute("SELECT count(DISTINCT SubAccountId) FROM billing").fetchone() or (0,)
    assert accounts == 3 * spec.accounts_per_provider
    # List >= billed for usage, committed usage cheaper than its list price.
    (bad,) = con.execute("SELECT count(*) FROM billing WHERE ChargeCategory = 'Usage' AND BilledCost > ListCost + 1e-9"
                         ).fetchone() or (1,)
    assert bad == 0
    apps = {a for (a,) in con.execute(f"SELECT DISTINCT {insights.APP} FROM billing").fetchall()}
    assert None in apps and len(apps - {None}) >= 8
    assert summary["rows"] == usage + sum(con.execute(
        "SELECT count(*) FROM billing WHERE ChargeCategory <> 'Usage'").fetchone() or (0,))
    con.close()


def test_planted_anomalies_have_known_start_duration_and_cost(dataset: tuple[Path, dict[str, object]]) -> None:
    db, summary = dataset
    anomalies = summary["anomalies"]
    assert isinstance(anomalies, list)
    spec = DatasetSpec()
    assert len(anomalies) == len(STREAMS) * spec.months * spec.anomalies_per_month
    con = duckdb.connect(str(db), read_only=True)
    for a in anomalies:
        assert a["kind"] in ("spike", "level_shift")
        assert (a["days"] <= 2) if a["kind"] == "spike" else (4 <= a["days"] <= 6)
        assert a["excess_cost"] > 0
        # The culprit's cost on the anomaly's days is m times a normal day: its excess is cost x (m - 1) / m.
        (cost,) = con.execute("SELECT sum(BilledCost) FROM billing WHERE ResourceId = ? AND ChargePeriodStart "
                              "BETWEEN ?::TIMESTAMP AND ?::TIMESTAMP", [a["resource_id"], a["start"], a["end"]]
                              ).fetchone() or (0.0,)
        assert cost * (a["multiplier"] - 1) / a["multiplier"] == pytest.approx(a["excess_cost"], abs=0.01)
    con.close()


def test_reference_detector_finds_every_planted_anomaly(dataset: tuple[Path, dict[str, object]]) -> None:
    db, summary = dataset
    con = duckdb.connect(str(db), read_only=True)
    for provider, service, unit in STREAMS:
        series = con.execute(insights.series_sql(service, unit)).fetchall()
        planted = [a for a in summary["anomalies"] if a["service"] == service]  # type: ignore[union-attr]
        found = detect(series)
        scores = score_detection([e.to_dict() for e in found], planted)
        assert scores["f1"] == 1.0, (provider, scores, [e.to_dict() for e in found])
        # One detected event per planted anomaly, with the same days.
        assert sorted((e.start.isoformat(), e.end.isoformat()) for e in found) == \
            sorted((a["start"], a["end"]) for a in planted)
    con.close()


def test_detector_on_a_hand_made_series() -> None:
    start = dt.date(2024, 1, 1)
    series = [(start + dt.timedelta(days=i), 100.0 if (start + dt.timedelta(days=i)).weekday() < 5 else 80.0)
              for i in range(56)]
    series[20] = (series[20][0], 300.0)  # a spike
    for i in range(40, 44):  # a level shift
        series[i] = (series[i][0], series[i][1] * 1.5)
    events = detect(series)
    assert [(e.start, e.days) for e in events] == [(series[20][0], 1), (series[40][0], 4)]
    normal = 100.0 if series[20][0].weekday() < 5 else 80.0  # the same weekday's usual cost
    assert events[0].excess == pytest.approx(300.0 - normal)
    assert detect(series, (series[30][0], series[55][0])) == [events[1]]
    with pytest.raises(ValueError):
        detect(series[:10])


def test_importance_is_cost_times_duration_normalised() -> None:
    a = Event(dt.date(2024, 1, 1), dt.date(2024, 1, 1), 300.0, 200.0)
    b = Event(dt.date(2024, 1, 10), dt.date(2024, 1, 13), 600.0, 200.0)
    assert importance([a, b]) == [pytest.approx(300 / 2400), 1.0]
    assert [r["start"] for r in ranked([a, b])] == ["2024-01-10", "2024-01-01"]


# -- the SQL tool ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql, why", [
    ("DELETE FROM billing", "DELETE"),
    ("INSERT INTO billing SELECT * FROM billing", "INSERT"),
    ("UPDATE billing SET BilledCost = 0", "UPDATE"),
    ("DROP TABLE billing", "DROP"),
    ("CREATE TABLE x AS SELECT 1", "CREATE"),
    ("COPY billing TO '/tmp/out.csv'", "COPY"),
    ("ATTACH '/tmp/other.duckdb' AS other", "ATTACH"),
    ("SET threads = 1", "SET"),
    ("PRAGMA database_list", "PRAGMA"),
    ("INSTALL httpfs", "LOAD"),
    ("CALL pragma_version()", "CALL"),
    ("SELECT 1; SELECT 2", "exactly one statement"),
    ("SELECT 1; DELETE FROM billing", "exactly one statement"),
    ("SELEC BilledCost FROM billing", "does not parse"),
    ("   ", "empty"),
])
def test_lint_refuses_everything_but_one_select(sql: str, why: str) -> None:
    with pytest.raises(SqlError) as err:
        lint(sql)
    assert err.value.code == "lint"
    assert why in err.value.message


def test_lint_accepts_select_with_and_set_operations() -> None:
    assert lint("SELECT 1;") == "SELECT 1"
    assert lint("WITH a AS (SELECT 1 AS x) SELECT x FROM a").startswith("WITH")
    assert lint("SELECT 1 UNION ALL SELECT 2")


def test_sql_tool_is_read_only_limited_and_paged(dataset: tuple[Path, dict[str, object]]) -> None:
    db, _ = dataset
    tool = BillingDatabase(db)
    page = tool.query("SELECT ResourceId FROM billing ORDER BY ChargePeriodStart, ResourceId", limit=5)
    assert page.columns == ["ResourceId"] and len(page.rows) == 5 and page.more
    nxt = tool.query("SELECT ResourceId FROM billing ORDER BY ChargePeriodStart, ResourceId", limit=5, offset=5)
    assert nxt.offset == 5 and nxt.rows != page.rows
    both = tool.query("SELECT ResourceId FROM billing ORDER BY ChargePeriodStart, ResourceId", limit=10)
    assert both.rows == page.rows + nxt.rows
    last = tool.query("SELECT DISTINCT ProviderName FROM billing ORDER BY 1", limit=10)
    assert last.rows == [["AWS"], ["Google Cloud"], ["Microsoft"]] and not last.more
    dates = tool.query("SELECT min(ChargePeriodStart) AS t FROM billing").rows
    assert dates == [["2024-07-01T00:00:00"]]  # JSON-safe values
    with pytest.raises(SqlError) as err:
        tool.query("SELECT * FROM read_csv('/etc/passwd')")
    assert err.value.code == "denied"
    with pytest.raises(SqlError) as err:
        tool.query("SELECT * FROM read_parquet('/tmp/anything.parquet')")
    assert err.value.code == "denied"
    with pytest.raises(SqlError) as err:
        tool.query("DELETE FROM billing")
    assert err.value.code == "lint"
    with pytest.raises(SqlError) as err:
        tool.query("SELECT no_such_column FROM billing")
    assert err.value.code == "error" and "no_such_column" in err.value.message
    with pytest.raises(SqlError):
        tool.query("SELECT 1", limit=0)
    with pytest.raises(SqlError):
        tool.query("SELECT 1", limit=1001)
    described = tool.describe("billing")
    assert {c["name"] for c in described["columns"]} == FOCUS_COLUMNS
    assert described["rows"] > 0
    tool.close()
    # Nothing changed on disk.
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM billing").fetchone() == (described["rows"],)
    con.close()


def test_sql_tool_stops_a_long_query(dataset: tuple[Path, dict[str, object]]) -> None:
    db, _ = dataset
    tool = BillingDatabase(db, timeout=0.2)
    with pytest.raises(SqlError) as err:
        tool.query("SELECT count(*) FROM range(100000000000) a")
    assert err.value.code == "timeout"
    assert tool.query("SELECT 1").rows == [[1]]  # still usable
    tool.close()


def test_generate_command_prints_no_ground_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "b.duckdb"
    assert finops_main(["generate", "--database", str(db), "--resources", "40", "--months", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] > 0 and "anomalies" not in printed
    assert "multiplier" not in json.dumps(printed)
