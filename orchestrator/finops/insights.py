"""Reference queries of the data-insight questions (ITBench Table 26) and of the anomaly series (Table 27).

Each question kind is a SQL template over the FOCUS table ``billing``; a scenario's ground truth holds the resolved
query and the rows it returns on the scenario's dataset (``reference_answer``), so the expected answer is exactly
what the query gives. Windows are half-open on ChargePeriodStart: ``start <= ChargePeriodStart < end``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from .sql import json_value

APP = "json_extract_string(Tags, '$.application')"


@dataclass(frozen=True)
class Question:
    kind: str
    sql: str  # str.format template
    keys: tuple[str, ...]  # matched exactly
    fields: tuple[str, ...]  # numeric (with tolerance) or text (exact) values per row
    ordered: bool  # the answer's order matters (top-N lists)


def _window(start: str, end: str) -> str:
    return f"ChargePeriodStart >= TIMESTAMP '{start}' AND ChargePeriodStart < TIMESTAMP '{end}'"


QUESTIONS: dict[str, Question] = {
    "cost_by_category": Question(
        "cost_by_category",
        "SELECT ServiceCategory, round(sum(BilledCost), 2) AS total_cost FROM billing "
        "WHERE ServiceCategory IN ({categories}) AND {window} GROUP BY ServiceCategory ORDER BY ServiceCategory",
        ("ServiceCategory",), ("total_cost",), False),
    "top_applications": Question(
        "top_applications",
        f"SELECT {APP} AS application, round(sum(BilledCost), 2) AS total_cost FROM billing "
        f"WHERE {{window}} AND {APP} IS NOT NULL GROUP BY application ORDER BY total_cost DESC LIMIT {{top}}",
        ("application",), ("total_cost",), True),
    "allocation_ratio": Question(
        "allocation_ratio",
        f"SELECT ProviderName, round(100 * sum(CASE WHEN {APP} IS NOT NULL THEN BilledCost ELSE 0 END) "
        "/ sum(BilledCost), 2) AS allocated_pct FROM billing WHERE BilledCost >= 0 AND {window} "
        "GROUP BY ProviderName ORDER BY ProviderName",
        ("ProviderName",), ("allocated_pct",), False),
    "peak_to_average": Question(
        "peak_to_average",
        f"WITH daily AS (SELECT {APP} AS application, ChargePeriodStart::DATE AS day, sum(BilledCost) AS cost "
        f"FROM billing WHERE BilledCost >= 0 AND {{window}} AND {APP} IS NOT NULL GROUP BY ALL), "
        "stats AS (SELECT application, max(cost) AS peak_cost, avg(cost) AS average_cost, "
        "arg_max(day, cost) AS peak_date FROM daily GROUP BY application) "
        "SELECT application, round(peak_cost, 2) AS peak_cost, round(average_cost, 2) AS average_cost, "
        "round(peak_cost / average_cost, 4) AS ratio, strftime(peak_date, '%Y-%m-%d') AS peak_date FROM stats "
        "ORDER BY peak_cost / average_cost DESC LIMIT {top}",
        ("application",), ("peak_cost", "average_cost", "ratio", "peak_date"), True),
    "cost_variance": Question(
        "cost_variance",
        f"WITH daily AS (SELECT {APP} AS application, ChargePeriodStart::DATE AS day, sum(BilledCost) AS cost "
        f"FROM billing WHERE BilledCost >= 0 AND {{window}} AND {APP} IS NOT NULL GROUP BY ALL) "
        "SELECT application, round(var_pop(cost), 2) AS variance FROM daily GROUP BY application "
        "ORDER BY var_pop(cost) DESC LIMIT {top}",
        ("application",), ("variance",), True),
    "discount_coverage": Question(
        "discount_coverage",
        "WITH acct AS (SELECT SubAccountId, any_value(SubAccountName) AS SubAccountName, "
        "sum(BilledCost) AS total_bill, "
        "-sum(CASE WHEN ChargeCategory = 'Credit' THEN BilledCost ELSE 0 END) AS credits, "
        "sum(CASE WHEN ChargeCategory IN ('Usage', 'Tax') THEN BilledCost ELSE 0 END) AS charges "
        "FROM billing GROUP BY SubAccountId) "
        "SELECT SubAccountId, SubAccountName, round(100 * credits / charges, 2) AS discount_pct FROM acct "
        "WHERE total_bill > 0 ORDER BY credits / charges DESC, SubAccountId LIMIT {top}",
        ("SubAccountId",), ("SubAccountName", "discount_pct"), True),
}


def resolve(kind: str, **params: Any) -> str:
    """The reference query of question ``kind`` with its parameters (window, categories, top)."""
    q = QUESTIONS[kind]
    values = dict(params)
    if "start" in values:
        values["window"] = _window(values.pop("start"), values.pop("end"))
    if "categories" in values:
        values["categories"] = ", ".join("'" + c.replace("'", "''") + "'" for c in values["categories"])
    return q.sql.format(**values)


def run(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    cols = [d[0] for d in cursor.description or []]
    return [{c: json_value(v) for c, v in zip(cols, row, strict=True)} for row in cursor.fetchall()]


def series_sql(service: str, unit: str) -> str:
    """The daily cost series anomaly scenarios are about: BilledCost per ChargePeriodStart of one service."""
    s = service.replace("'", "''")
    u = unit.replace("'", "''")
    return ("SELECT ChargePeriodStart::DATE AS day, sum(BilledCost) AS cost FROM billing "
            f"WHERE ServiceName = '{s}' AND PricingUnit = '{u}' AND ChargeCategory = 'Usage' "
            "GROUP BY day ORDER BY day")
