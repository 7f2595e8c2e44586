"""Result types of the telemetry query engine: a generic `Page` and the JSON-ready row shapes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Generic, TypedDict, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a larger result. `total` counts every match; `next_offset` is None when exhausted.

    Results are never silently truncated: when `next_offset` is not None, ask again with `offset=next_offset`.
    """

    items: list[T]
    total: int
    offset: int
    limit: int
    next_offset: int | None

    @classmethod
    def build(cls, items: list[T], total: int, offset: int, limit: int) -> Page[T]:
        end = offset + len(items)
        return cls(items=items, total=total, offset=offset, limit=limit, next_offset=end if end < total else None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (items are already plain dicts)."""
        return asdict(self)


class LogRecord(TypedDict):
    time_ns: int
    service: str | None
    instance: str | None
    severity: str | None
    severity_number: int | None
    body: str | None
    attributes: dict[str, Any]
    trace_id: str | None
    span_id: str | None


class TraceSummary(TypedDict):
    trace_id: str
    root_name: str | None
    root_service: str | None
    start_ns: int
    end_ns: int | None
    duration_ms: float | None
    span_count: int
    error_count: int
    services: list[str]


class Span(TypedDict):
    trace_id: str
    span_id: str
    parent_span_id: str | None
    depth: int
    service: str | None
    instance: str | None
    name: str | None
    kind: str | None
    start_ns: int
    end_ns: int | None
    duration_ms: float | None
    status_code: str | None
    status_message: str | None
    http_status: int | None
    error: bool
    attributes: dict[str, Any]


class ServiceCall(TypedDict):
    source: str
    target: str
    calls: int
    errors: int
    p95_ms: float | None


class ServiceErrors(TypedDict):
    service: str
    requests: int
    errors: int
    error_rate: float
    p95_ms: float | None
