"""Traces and logs in the exact JSON-lines formats OpsBench's readers expect.

Traces: the OpenTelemetry SDK with a BatchSpanProcessor and :class:`JsonlSpanExporter`, writing
one JSON object per span to ``$TELEMETRY_DIR/traces/<instance>.jsonl``.
Logs: :class:`JsonLogger`, one JSON object per line to stdout and ``$TELEMETRY_DIR/logs/<instance>.jsonl``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

SEVERITY_NUMBERS = {"DEBUG": 5, "INFO": 9, "WARN": 13, "ERROR": 17}
PROPAGATOR = TraceContextTextMapPropagator()


def instance_name() -> str:
    """SHOP_INSTANCE, or the hostname (the container name under podman)."""
    return os.environ.get("SHOP_INSTANCE") or socket.gethostname()


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), default=_json_default, ensure_ascii=False)


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """One span in the OpsBench line format."""
    ctx = span.context
    parent = span.parent
    resource = span.resource.attributes
    status = span.status
    return {
        "resource": {
            "service.name": str(resource.get("service.name", "")),
            "service.instance.id": str(resource.get("service.instance.id", "")),
        },
        "traceId": format(ctx.trace_id, "032x") if ctx is not None else "",
        "spanId": format(ctx.span_id, "016x") if ctx is not None else "",
        "parentSpanId": format(parent.span_id, "016x") if parent is not None else "",
        "name": span.name,
        "kind": span.kind.name,
        "startTimeUnixNano": int(span.start_time or 0),
        "endTimeUnixNano": int(span.end_time or 0),
        "attributes": {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()},
        "status": {"code": status.status_code.name, "message": status.description or ""},
    }


class JsonlSpanExporter(SpanExporter):
    """Appends finished spans to a JSON-lines file, one object per line, flushed per batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None

    def _file(self) -> IO[str]:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the process lifetime
        return self._fh

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            data = "".join(dumps(span_to_dict(span)) + "\n" for span in spans)
            with self._lock:
                fh = self._file()
                fh.write(data)
                fh.flush()
        except (OSError, ValueError):
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class JsonLogger:
    """Structured logs: one JSON object per line to a stream (stdout) and optionally a file."""

    def __init__(self, service: str, instance: str, path: Path | None = None,
                 stream: IO[str] | None = None) -> None:
        self.resource = {"service.name": service, "service.instance.id": instance}
        self.stream = stream if stream is not None else sys.stdout
        self.path = path
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the process lifetime

    def log(self, severity: str, body: str, attributes: Mapping[str, Any] | None = None) -> None:
        ctx = trace.get_current_span().get_span_context()
        record = {
            "resource": self.resource,
            "timeUnixNano": time.time_ns(),
            "severityText": severity,
            "severityNumber": SEVERITY_NUMBERS.get(severity, 9),
            "body": body,
            "attributes": dict(attributes or {}),
            "traceId": format(ctx.trace_id, "032x") if ctx.is_valid else "",
            "spanId": format(ctx.span_id, "016x") if ctx.is_valid else "",
        }
        line = dumps(record) + "\n"
        with self._lock:
            for fh in (self.stream, self._fh):
                if fh is None:
                    continue
                try:
                    fh.write(line)
                    fh.flush()
                except (OSError, ValueError):
                    pass  # a closed stdout must not take the service down

    def info(self, body: str, **attributes: Any) -> None:
        self.log("INFO", body, attributes)

    def warn(self, body: str, **attributes: Any) -> None:
        self.log("WARN", body, attributes)

    def error(self, body: str, **attributes: Any) -> None:
        self.log("ERROR", body, attributes)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class Telemetry:
    """Per-process tracing and logging for one service instance."""

    def __init__(self, service: str, instance: str | None = None, telemetry_dir: str | None = None,
                 stream: IO[str] | None = None, schedule_delay_millis: int = 500) -> None:
        self.service = service
        self.instance = instance or instance_name()
        base = Path(telemetry_dir) if telemetry_dir else None
        self.logger = JsonLogger(service, self.instance, base / "logs" / f"{self.instance}.jsonl" if base else None,
                                 stream)
        resource = Resource({"service.name": service, "service.instance.id": self.instance})
        self.provider = TracerProvider(resource=resource)
        self.exporter: JsonlSpanExporter | None = None
        if base is not None:
            self.exporter = JsonlSpanExporter(base / "traces" / f"{self.instance}.jsonl")
            self.provider.add_span_processor(BatchSpanProcessor(
                self.exporter, max_queue_size=8192, schedule_delay_millis=schedule_delay_millis,
                max_export_batch_size=512))
        self.tracer = self.provider.get_tracer("shop")

    def shutdown(self) -> None:
        """Flush and close: exports every finished span."""
        self.provider.shutdown()
        self.logger.close()


def from_env(service: str) -> Telemetry:
    return Telemetry(service, instance_name(), os.environ.get("TELEMETRY_DIR") or None)
