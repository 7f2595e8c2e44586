"""A deterministic, seeded generator of cloud cost and usage records in the FOCUS format, with planted anomalies.

One row per resource and day (ChargeCategory ``Usage``), plus a monthly ``Tax`` row per sub account and a monthly
``Credit`` row (negative cost) for the sub accounts that get credits. Costs follow a per-resource base quantity, a
weekday/weekend pattern (compute and databases), a per-resource growth trend and bounded noise. Anomalies are
planted in the daily Compute series of each provider (``catalog.STREAMS``): short *spikes* (1-2 days) and temporary
*level shifts* (4-6 days), each on one culprit resource, with a known start, duration and excess cost.

Everything random comes from ``random.Random(seed)`` (the catalogue of accounts and resources, the anomaly plan) and
from an integer hash of (seed, resource, day) evaluated inside DuckDB (per-row noise), so the same seed gives the
same rows in the same order, and the same Parquet bytes with the same DuckDB version. The rows are produced by one
SQL query (``dataset_sql``) run by DuckDB, which is what makes 5 million rows a matter of seconds.

The ground truth (the planted anomalies) is returned by :func:`generate` and never written into the dataset: the
table the agent queries has FOCUS columns only.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from .catalog import ACCOUNT_PURPOSES, APPLICATIONS, PROVIDERS, STREAMS, TEAMS, Provider, Service

TABLE = "billing"
UNTAGGED_SHARE = 0.15  # resources without an application tag (unallocated cost)
WEEKEND_FACTOR = 0.8  # compute and database usage on Saturdays and Sundays


@dataclass(frozen=True)
class DatasetSpec:
    """What to generate. ``resources`` x days usage rows (plus a few tax and credit rows per account and month)."""

    seed: int = 7
    resources: int = 400
    start: str = "2024-07-01"
    months: int = 3
    accounts_per_provider: int = 3
    anomalies_per_month: int = 3
    """Per stream (provider compute series) and month: one level shift, the others spikes."""

    @property
    def start_date(self) -> dt.date:
        return dt.date.fromisoformat(self.start)

    @property
    def end_date(self) -> dt.date:
        """First day after the data."""
        d = self.start_date
        for _ in range(self.months):
            d = _next_month(d)
        return d

    @property
    def days(self) -> int:
        return (self.end_date - self.start_date).days


@dataclass(frozen=True)
class Account:
    provider: str
    id: str
    name: str
    billing_account: str
    discount: float  # negotiated discount on list prices
    tax_rate: float
    credit_rate: float  # 0: no credits


@dataclass(frozen=True)
class Resource:
    rid: int
    provider: Provider
    account: Account
    service: Service
    region: str
    application: str | None
    environment: str
    base_qty: float
    growth: float  # relative growth per 30 days
    commitment: str | None  # CommitmentDiscountId when covered
    commit_discount: float

    @property
    def resource_id(self) -> str:
        return f"{self.provider.code}-{self.service.resource_type.lower()}-{self.rid:06d}"

    @property
    def discount(self) -> float:
        return self.commit_discount if self.commitment else self.account.discount

    @property
    def base_cost(self) -> float:
        return self.base_qty * self.service.price * (1 - self.discount)


@dataclass(frozen=True)
class Anomaly:
    id: str
    provider: str
    service: str
    pricing_unit: str
    kind: str  # spike | level_shift
    start: str  # first anomalous day (YYYY-MM-DD)
    days: int
    resource_id: str
    sub_account_id: str
    multiplier: float
    excess_cost: float = 0.0  # BilledCost added by the anomaly (filled in after generation)

    @property
    def end(self) -> str:
        """Last anomalous day (inclusive)."""
        return (dt.date.fromisoformat(self.start) + dt.timedelta(days=self.days - 1)).isoformat()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "end": self.end}


@dataclass
class Plan:
    spec: DatasetSpec
    accounts: list[Account] = field(default_factory=list)
    resources: list[Resource] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)


def _next_month(d: dt.date) -> dt.date:
    return dt.date(d.year + d.month // 12, d.month % 12 + 1, 1)


def _account_id(rng: random.Random, provider: Provider, purpose: str) -> str:
    if provider.code == "aws":
        return f"{rng.randrange(10**11, 10**12):012d}"
    if provider.code == "az":
        return "-".join(f"{rng.getrandbits(b):0{b // 4}x}" for b in (32, 16, 16, 16, 48))
    return f"{purpose}-project-{rng.randrange(10**5, 10**6)}"


def make_plan(spec: DatasetSpec) -> Plan:
    """Accounts, resources and anomalies: everything the rows derive from except the per-row noise."""
    if spec.resources < 20 or spec.months < 1 or spec.accounts_per_provider < 1:
        raise ValueError("need at least 20 resources, 1 month and 1 account per provider")
    rng = random.Random(spec.seed)
    plan = Plan(spec)
    by_provider: dict[str, list[Account]] = {}
    for provider in PROVIDERS:
        billing = _account_id(rng, provider, "billing")
        accounts = []
        for i in range(spec.accounts_per_provider):
            purpose = ACCOUNT_PURPOSES[i % len(ACCOUNT_PURPOSES)]
            suffix = "" if i < len(ACCOUNT_PURPOSES) else f"-{i // len(ACCOUNT_PURPOSES)}"
            accounts.append(Account(
                provider=provider.name, id=_account_id(rng, provider, purpose),
                name=f"{provider.code}-{purpose}{suffix}", billing_account=billing,
                discount=round(rng.uniform(0.0, 0.08), 4), tax_rate=round(rng.choice((0.0, 0.05, 0.07, 0.1)), 4),
                credit_rate=round(rng.uniform(0.02, 0.2), 4) if rng.random() < 0.6 else 0.0))
        by_provider[provider.name] = accounts
        plan.accounts.extend(accounts)
    weights = [p.weight for p in PROVIDERS]
    for rid in range(spec.resources):
        provider = rng.choices(PROVIDERS, weights)[0]
        service = rng.choice(provider.services)
        account = rng.choice(by_provider[provider.name])
        app = None if rng.random() < UNTAGGED_SHARE else rng.choice(APPLICATIONS)
        committed = service.commit and rng.random() < 0.35
        plan.resources.append(Resource(
            rid=rid, provider=provider, account=account, service=service, region=rng.choice(provider.regions),
            application=app, environment="prod" if account.name.endswith("prod") else "nonprod",
            base_qty=service.qty * rng.lognormvariate(0, 0.8)
            * (1 if service.unit != "Hours" else rng.choice((1, 2, 4, 8))),
            growth=rng.uniform(-0.01, 0.05),
            commitment=f"{provider.code}-commit-{account.id[-6:]}" if committed else None,
            commit_discount=round(rng.uniform(0.25, 0.45), 4) if committed else 0.0))
    plan.anomalies = _plan_anomalies(spec, plan.resources, rng)
    return plan


def _plan_anomalies(spec: DatasetSpec, resources: list[Resource], rng: random.Random) -> list[Anomaly]:
    out: list[Anomaly] = []
    for provider, service, unit in STREAMS:
        members = [r for r in resources if r.provider.name == provider and r.service.name == service]
        if len(members) < 3:
            continue
        daily = sum(r.base_cost for r in members)
        month = spec.start_date
        while month < spec.end_date:
            length = calendar.monthrange(month.year, month.month)[1]
            taken: list[tuple[int, int]] = []
            for n in range(spec.anomalies_per_month):
                kind = "level_shift" if n == 0 else "spike"
                days = rng.randint(4, 6) if kind == "level_shift" else rng.randint(1, 2)
                ratio = rng.uniform(0.4, 0.7) if kind == "level_shift" else rng.uniform(0.6, 1.6)
                for _ in range(200):
                    first = rng.randint(3, length - days - 1)
                    if all(first + days + 3 <= a or b + 3 <= first for a, b in taken):
                        break
                else:
                    continue
                taken.append((first, first + days))
                culprit = rng.choice(members)
                multiplier = 1 + ratio * daily / culprit.base_cost
                start = dt.date(month.year, month.month, first)
                out.append(Anomaly(
                    id=f"{provider.split()[0].lower()}-{start.isoformat()}", provider=provider, service=service,
                    pricing_unit=unit, kind=kind, start=start.isoformat(), days=days,
                    resource_id=culprit.resource_id, sub_account_id=culprit.account.id,
                    multiplier=round(multiplier, 6)))
            month = _next_month(month)
    return sorted(out, key=lambda a: (a.start, a.provider))


# -- SQL ---------------------------------------------------------------------------------------------------------

_MACROS = """
CREATE OR REPLACE TEMP MACRO ob_mix(x) AS (xor(x, x >> 16) * 73244475) % 4294967296;
"""


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _load_resources(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    """The resources and accounts as tables (zipped lists, no per-row INSERT)."""
    cols: dict[str, tuple[str, list[Any]]] = {
        "rid": ("BIGINT", []), "provider": ("VARCHAR", []), "publisher": ("VARCHAR", []),
        "billing_account": ("VARCHAR", []), "account_id": ("VARCHAR", []), "account_name": ("VARCHAR", []),
        "service": ("VARCHAR", []), "category": ("VARCHAR", []), "unit": ("VARCHAR", []),
        "price": ("DOUBLE", []), "resource_type": ("VARCHAR", []), "region": ("VARCHAR", []),
        "resource_id": ("VARCHAR", []), "tags": ("VARCHAR", []), "base_qty": ("DOUBLE", []),
        "growth": ("DOUBLE", []), "weekly": ("BOOLEAN", []), "discount": ("DOUBLE", []),
        "commitment": ("VARCHAR", []),
    }
    for r in plan.resources:
        tags = {"environment": r.environment}
        if r.application:
            tags.update(application=r.application, team=TEAMS[r.application])
        values = (r.rid, r.provider.name, r.provider.name, r.account.billing_account, r.account.id, r.account.name,
                  r.service.name, r.service.category, r.service.unit, r.service.price, r.service.resource_type,
                  r.region, r.resource_id, json.dumps(tags, sort_keys=True, separators=(",", ":")), r.base_qty,
                  r.growth, r.service.category in ("Compute", "Databases"), r.discount, r.commitment)
        for (_, (_, col)), v in zip(cols.items(), values, strict=True):
            col.append(v)
    select = ", ".join(f"unnest(?::{t}[]) AS {n}" for n, (t, _) in cols.items())
    con.execute(f"CREATE TEMP TABLE ob_resources AS SELECT {select}", [c for _, c in cols.values()])
    acols = {"account_id": [a.id for a in plan.accounts], "tax_rate": [a.tax_rate for a in plan.accounts],
             "credit_rate": [a.credit_rate for a in plan.accounts], "idx": list(range(len(plan.accounts)))}
    con.execute("CREATE TEMP TABLE ob_accounts AS SELECT unnest(?::VARCHAR[]) AS account_id, "
                "unnest(?::DOUBLE[]) AS tax_rate, unnest(?::DOUBLE[]) AS credit_rate, unnest(?::BIGINT[]) AS idx",
                list(acols.values()))
    start = plan.spec.start_date
    by_id = {r.resource_id: r.rid for r in plan.resources}
    an = plan.anomalies
    con.execute("CREATE TEMP TABLE ob_anomalies AS SELECT unnest(?::VARCHAR[]) AS id, unnest(?::BIGINT[]) AS rid, "
                "unnest(?::BIGINT[]) AS first_day, unnest(?::BIGINT[]) AS last_day, unnest(?::DOUBLE[]) AS mult",
                [[a.id for a in an], [by_id[a.resource_id] for a in an],
                 [(dt.date.fromisoformat(a.start) - start).days for a in an],
                 [(dt.date.fromisoformat(a.start) - start).days + a.days - 1 for a in an],
                 [a.multiplier for a in an]])
    con.execute("CREATE TEMP TABLE ob_anomaly_days AS SELECT rid, first_day + range AS day, mult "
                "FROM ob_anomalies, range(0, 400) WHERE first_day + range <= last_day")


def dataset_sql(plan: Plan) -> str:
    """The query producing every row, in a fixed order (needs the temp tables of ``_load_resources``)."""
    spec = plan.spec
    start = _lit(spec.start)
    return f"""
WITH days AS (SELECT range AS day, dayofweek(DATE {start} + range::INTEGER) IN (0, 6) AS weekend
              FROM range(0, {spec.days})),
h0 AS (
  SELECT r.*, d.day, d.weekend, ({spec.seed} * 1000003 + r.rid * 7919 + d.day * 104729) % 4294967296 AS x0
  FROM ob_resources r CROSS JOIN days d
),
h1 AS (SELECT * EXCLUDE (x0), ob_mix(x0) AS x1, ob_mix(xor(x0, 2654435769)) AS y1 FROM h0),
h2 AS (SELECT * EXCLUDE (x1, y1), ob_mix(x1) AS x2, ob_mix(y1) AS y2 FROM h1),
noise AS (SELECT * EXCLUDE (x2, y2), (xor(x2, x2 >> 16) + xor(y2, y2 >> 16)) / 4294967296.0 AS u FROM h2),
usage AS (
  SELECT n.*, (DATE {start} + n.day::INTEGER)::TIMESTAMP AS t,
         n.base_qty
           * (CASE WHEN n.weekly AND n.weekend THEN {WEEKEND_FACTOR} ELSE 1.0 END)
           * (1 + n.growth * n.day / 30.0)
           * (0.92 + 0.08 * n.u)
           * coalesce(a.mult, 1.0) AS qty
  FROM noise n LEFT JOIN ob_anomaly_days a ON a.rid = n.rid AND a.day = n.day
),
priced AS (
  SELECT *, round(qty, 6) AS q, round(round(qty, 6) * price, 6) AS list_cost,
         round(round(qty, 6) * price * (1 - discount), 6) AS billed
  FROM usage
),
usage_rows AS (
  SELECT day AS k1, 1 AS k2, rid AS k3,
    billing_account AS BillingAccountId, 'USD' AS BillingCurrency,
    date_trunc('month', t) AS BillingPeriodStart, date_trunc('month', t) + INTERVAL 1 MONTH AS BillingPeriodEnd,
    t AS ChargePeriodStart, t + INTERVAL 1 DAY AS ChargePeriodEnd,
    'Usage' AS ChargeCategory, 'Usage-Based' AS ChargeFrequency,
    service || ' ' || unit || ' in ' || region AS ChargeDescription,
    billed AS BilledCost, billed AS EffectiveCost, list_cost AS ListCost, price AS ListUnitPrice,
    q AS PricingQuantity, unit AS PricingUnit, q AS ConsumedQuantity, unit AS ConsumedUnit,
    CASE WHEN commitment IS NULL THEN 'Standard' ELSE 'Committed' END AS PricingCategory,
    commitment AS CommitmentDiscountId,
    provider AS ProviderName, publisher AS PublisherName, provider AS InvoiceIssuerName,
    service AS ServiceName, category AS ServiceCategory,
    account_id AS SubAccountId, account_name AS SubAccountName,
    region AS RegionId, resource_id AS ResourceId, resource_type AS ResourceType, tags AS Tags
  FROM priced
),
monthly AS (
  SELECT u.BillingAccountId, u.BillingPeriodStart, u.BillingPeriodEnd, u.ProviderName, u.PublisherName,
         u.SubAccountId, u.SubAccountName, a.tax_rate, a.credit_rate, a.idx, sum(u.BilledCost) AS billed
  FROM usage_rows u JOIN ob_accounts a ON a.account_id = u.SubAccountId
  GROUP BY ALL
),
adjustments AS (
  SELECT datediff('day', DATE {start}, BillingPeriodStart::DATE) AS k1, kind AS k2, idx AS k3,
    BillingAccountId, 'USD' AS BillingCurrency, BillingPeriodStart, BillingPeriodEnd,
    BillingPeriodStart AS ChargePeriodStart, BillingPeriodEnd AS ChargePeriodEnd,
    CASE kind WHEN 2 THEN 'Tax' ELSE 'Credit' END AS ChargeCategory, 'One-Time' AS ChargeFrequency,
    CASE kind WHEN 2 THEN 'Sales tax' ELSE 'Promotional credit' END AS ChargeDescription,
    amount AS BilledCost, amount AS EffectiveCost, amount AS ListCost, NULL::DOUBLE AS ListUnitPrice,
    NULL::DOUBLE AS PricingQuantity, NULL::VARCHAR AS PricingUnit, NULL::DOUBLE AS ConsumedQuantity,
    NULL::VARCHAR AS ConsumedUnit, NULL::VARCHAR AS PricingCategory, NULL::VARCHAR AS CommitmentDiscountId,
    ProviderName, PublisherName, ProviderName AS InvoiceIssuerName,
    NULL::VARCHAR AS ServiceName, 'Other' AS ServiceCategory, SubAccountId, SubAccountName,
    NULL::VARCHAR AS RegionId, NULL::VARCHAR AS ResourceId, NULL::VARCHAR AS ResourceType, '{{}}' AS Tags
  FROM (SELECT *, 2 AS kind, round(billed * tax_rate, 2) AS amount FROM monthly WHERE tax_rate > 0
        UNION ALL
        SELECT *, 3 AS kind, -round(billed * credit_rate, 2) AS amount FROM monthly WHERE credit_rate > 0)
)
SELECT * EXCLUDE (k1, k2, k3) FROM (SELECT * FROM usage_rows UNION ALL SELECT * FROM adjustments)
ORDER BY k1, k2, k3
"""


def connect(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.execute(_MACROS)
    return con


def _excess(con: duckdb.DuckDBPyConnection, plan: Plan, source: str) -> list[Anomaly]:
    """Each anomaly's excess BilledCost, measured on the generated rows in one pass: cost x (m - 1) / m on its
    culprit's rows of its days."""
    rows = con.execute(
        f"SELECT a.id, sum(b.BilledCost) * (any_value(a.mult) - 1) / any_value(a.mult) FROM {source} b "
        "JOIN (SELECT x.*, r.resource_id FROM ob_anomalies x JOIN ob_resources r USING (rid)) a "
        "ON b.ResourceId = a.resource_id AND b.ChargeCategory = 'Usage' "
        f"AND b.ChargePeriodStart >= DATE {_lit(plan.spec.start)} + a.first_day::INTEGER "
        f"AND b.ChargePeriodStart <= DATE {_lit(plan.spec.start)} + a.last_day::INTEGER "
        "GROUP BY a.id").fetchall()
    excess = {str(i): float(v or 0.0) for i, v in rows}
    return [Anomaly(**{**asdict(a), "excess_cost": round(excess.get(a.id, 0.0), 2)}) for a in plan.anomalies]


def generate(spec: DatasetSpec, *, parquet: Path | None = None, database: Path | None = None,
             threads: int | None = None) -> dict[str, Any]:
    """Generate the dataset into a Parquet file and/or a DuckDB database file (table ``billing``).

    Returns the summary and the ground truth: ``rows``, ``seconds``, ``anomalies`` (the planted ones with their
    measured excess cost) and, with ``parquet``, its ``sha256``. The outputs hold FOCUS columns only."""
    if parquet is None and database is None:
        raise ValueError("give parquet and/or database")
    started = time.monotonic()
    plan = make_plan(spec)
    con = connect(threads)
    _load_resources(con, plan)
    sql = dataset_sql(plan)
    summary: dict[str, Any] = {"spec": asdict(spec)}
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
        database.unlink(missing_ok=True)
        con.execute(f"ATTACH {_lit(str(database))} AS out")
        con.execute(f"CREATE TABLE out.{TABLE} AS {sql}")
        source = f"out.{TABLE}"
    else:
        con.execute(f"CREATE TEMP TABLE {TABLE} AS {sql}")
        source = TABLE
    if parquet is not None:
        parquet.parent.mkdir(parents=True, exist_ok=True)
        con.execute(f"COPY (SELECT * FROM {source}) TO {_lit(str(parquet))} "
                    "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 1000000)")
        summary["sha256"] = hashlib.sha256(parquet.read_bytes()).hexdigest()
    (rows,) = con.execute(f"SELECT count(*) FROM {source}").fetchone() or (0,)
    summary["rows"] = int(rows)
    summary["anomalies"] = [a.to_dict() for a in _excess(con, plan, source)]
    if database is not None:
        con.execute("DETACH out")
    con.close()
    summary["seconds"] = round(time.monotonic() - started, 3)
    return summary
