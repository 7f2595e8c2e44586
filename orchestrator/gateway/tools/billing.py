"""The billing family (FinOps): read-only SQL over the run's FOCUS billing table."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..errors import ErrorCode, ToolError
from .base import PAGE_DESCRIPTION, Args, NoArgs, Tool, ToolResult


class QuerySqlArgs(Args):
    sql: str = Field(min_length=1, max_length=20_000, description="One read-only SELECT (or WITH ... SELECT) "
                     "statement in DuckDB's SQL dialect over the table `billing` (FOCUS columns).")
    limit: int = Field(100, ge=1, le=1000, description="Rows per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def query_sql(ctx: RunContext, args: QuerySqlArgs) -> ToolResult:
    from orchestrator.finops.sql import SqlError

    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    try:
        result = ctx.billing().query(args.sql, limit=args.limit, offset=cursor.offset)
    except SqlError as exc:
        code: ErrorCode = "denied" if exc.code == "denied" else "invalid"
        raise ToolError(code, f"sql: {exc.message}", field="sql") from None
    next_page = paging.Cursor(cursor.offset + len(result.rows)).encode(query) if result.more else None
    return ToolResult(result.to_dict(), next_page)


def describe_billing_schema(ctx: RunContext, args: NoArgs) -> ToolResult:
    from orchestrator.finops.sql import SqlError

    try:
        return ToolResult(ctx.billing().describe(ctx.billing_table))
    except SqlError as exc:
        raise ToolError("backend_error", exc.message) from None


TOOLS: tuple[Tool[Any], ...] = (
    Tool("query_sql", "Run one read-only SQL SELECT (DuckDB dialect) over the cloud billing table `billing`, in "
         "the FinOps Foundation's FOCUS format: BilledCost, EffectiveCost, ListCost, ChargePeriodStart/End, "
         "ChargeCategory (Usage, Tax, Credit), ProviderName, ServiceName, ServiceCategory, SubAccountId/Name, "
         "RegionId, PricingUnit, ResourceId, Tags (JSON text, e.g. json_extract_string(Tags, '$.application')). "
         "The query is linted first (one SELECT only); rows are paged.",
         QuerySqlArgs, "observe", "billing", query_sql),
    Tool("describe_billing_schema", "The billing table's columns and types, its row count and the span of its "
         "charge periods.", NoArgs, "observe", "billing", describe_billing_schema),
)
