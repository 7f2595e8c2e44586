"""Embedded query engine (DuckDB) over the `local` backend's telemetry files: OTel-shaped spans and logs as JSONL.

    store = TelemetryStore(run_dir / "telemetry")
    store.search_logs(service="checkout", severity_min="WARN", limit=50)
    store.get_traces(errors_only=True)
    store.get_trace(trace_id)
    store.service_calls(since_ns=..., until_ns=...)
    store.error_summary(since_ns=..., until_ns=...)

See `orchestrator.telemetry.store` for the design (threading, windows, error definition).
"""

from .store import MAX_LIMIT, SEVERITY_NUMBERS, TelemetryStore
from .types import LogRecord, Page, ServiceCall, ServiceErrors, Span, TraceSummary

__all__ = [
    "MAX_LIMIT",
    "SEVERITY_NUMBERS",
    "LogRecord",
    "Page",
    "ServiceCall",
    "ServiceErrors",
    "Span",
    "TelemetryStore",
    "TraceSummary",
]
