"""The browser family: what a real browser saw on the critical user journeys (CUJBench's evidence surface).

`roles/check_cuj` runs the journeys in Chromium and leaves a capture (orchestrator.cuj's layout) in the run; the
tools serve the latest capture inside the run's visible window (live) or the snapshot's copy (replay). The interface
is the same in every run that has pages: where nothing was captured, every tool answers an empty result that says
so, never an error. Every record carries its evidence id (`cuj:<journey>:<step>`, `screenshot:...`, `dom:...`,
`console:...`, `net:...`, `storage:...`, `span:...`), which a diagnosis cites in its `evidence`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from orchestrator.cuj.capture import Capture, CaptureError, load_capture

from .. import paging
from ..context import RunContext
from ..errors import ToolError
from .base import PAGE_DESCRIPTION, Args, Tool, ToolResult

NOTHING_CAPTURED = "no critical user journey was captured in this run (the browser saw nothing to report)"
DOM_MAX_CHARS = 60_000
SNIPPET_CHARS = 240
MAX_SNIPPETS = 20


def _capture(ctx: RunContext) -> Capture | None:
    directory = ctx.evidence.browser_capture(ctx.options.visible_since)
    if directory is None:
        return None
    try:
        return load_capture(directory)
    except CaptureError as exc:
        raise ToolError("backend_error", f"the browser capture cannot be read: {exc}") from None


def _lookup(field: str, fn: Callable[[], Any]) -> Any:
    """A capture lookup; an unknown journey or step is `not_found` naming the known ones."""
    try:
        return fn()
    except CaptureError as exc:
        raise ToolError("not_found", f"{field}: {exc}", field=field) from None


def _relative(capture: Capture, url: Any) -> Any:
    """A URL of the shop without the run's address (the agent cannot reach it anyway; it only varies per run)."""
    base = capture.base_url.rstrip("/")
    if isinstance(url, str) and base and url.startswith(base):
        return url[len(base):] or "/"
    return url


class JourneyArgs(Args):
    journey: str | None = Field(None, min_length=1, description="One journey (default: the summary of all).")


class StepArgs(Args):
    journey: str = Field(min_length=1, description="The journey, as get_cuj_report names it.")
    step: str = Field(min_length=1, description="The step, as get_cuj_report names it.")


class ListArgs(Args):
    journey: str | None = Field(None, min_length=1, description="Only this journey.")
    step: str | None = Field(None, min_length=1, description="Only this step (needs `journey`).")
    limit: int = Field(50, ge=1, le=200, description="Records per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def get_cuj_report(ctx: RunContext, args: JourneyArgs) -> ToolResult:
    capture = _capture(ctx)
    if capture is None:
        return ToolResult({"captured": False, "note": NOTHING_CAPTURED, "journeys": []})
    if args.journey is None:
        journeys = []
        for name in capture.journeys():
            entry = capture.summary(name)
            failed = entry.get("failed_step")
            journeys.append({"journey": name, "status": entry.get("status"), "failed_step": failed,
                             "message": entry.get("message"), "duration_s": entry.get("duration_s"),
                             "evidence_id": f"cuj:{name}:{failed}" if failed else None})
        return ToolResult({"captured": True, "captured_at": capture.index.get("started"), "journeys": journeys})
    report = _lookup("journey", lambda: capture.report(str(args.journey)))
    steps = [{"index": s.get("index"), "name": s.get("name"), "status": s.get("status"),
              "assertion": s.get("assertion"), "expected": s.get("expected"), "actual": s.get("actual"),
              "error": s.get("error"), "url": _relative(capture, s.get("url")), "duration_ms": s.get("duration_ms"),
              "evidence_id": s.get("evidence_id"),
              "screenshot_id": f"screenshot:{args.journey}:{s.get('name')}" if s.get("screenshot") else None,
              "dom_id": f"dom:{args.journey}:{s.get('name')}" if s.get("dom") else None}
             for s in report.get("steps") or []]
    return ToolResult({"captured": True, "journey": args.journey, "description": report.get("description"),
                       "status": report.get("status"), "failed_step": report.get("failed_step"),
                       "message": report.get("message"), "steps": steps})


def view_screenshot(ctx: RunContext, args: StepArgs) -> ToolResult:
    capture = _capture(ctx)
    if capture is None:
        raise ToolError("not_found", f"journey: {NOTHING_CAPTURED}", field="journey")
    _lookup("journey", lambda: capture.summary(args.journey))
    path = _lookup("step", lambda: capture.screenshot(args.journey, args.step))
    data = path.read_bytes()
    return ToolResult({"journey": args.journey, "step": args.step, "evidence_id": f"screenshot:{args.journey}:"
                       f"{args.step}", "mime_type": "image/png", "bytes": len(data),
                       "data": base64.b64encode(data).decode("ascii")})


class DomArgs(StepArgs):
    contains: str | None = Field(None, min_length=1, max_length=200,
                                 description="Only the snippets of the page around this text (case-insensitive).")
    offset: int = Field(0, ge=0, description="Start at this character of the HTML (for a long page).")
    max_chars: int = Field(20_000, ge=100, le=DOM_MAX_CHARS, description="At most this many characters.")


def get_dom_snapshot(ctx: RunContext, args: DomArgs) -> ToolResult:
    capture = _capture(ctx)
    if capture is None:
        raise ToolError("not_found", f"journey: {NOTHING_CAPTURED}", field="journey")
    _lookup("journey", lambda: capture.summary(args.journey))
    html: str = _lookup("step", lambda: capture.dom(args.journey, args.step))
    record = capture.step(args.journey, args.step)
    body: dict[str, Any] = {"journey": args.journey, "step": args.step, "evidence_id": f"dom:{args.journey}:"
                            f"{args.step}", "url": _relative(capture, record.get("url")), "total_chars": len(html)}
    if args.contains is not None:
        low, needle, at = html.casefold(), args.contains.casefold(), 0
        snippets: list[dict[str, Any]] = []
        while len(snippets) < MAX_SNIPPETS and (at := low.find(needle, at)) >= 0:
            snippets.append({"at": at, "html": html[max(at - SNIPPET_CHARS, 0):at + len(needle) + SNIPPET_CHARS]})
            at += len(needle)
        return ToolResult({**body, "matches": snippets})
    chunk = html[args.offset:args.offset + args.max_chars]
    end = args.offset + len(chunk)
    return ToolResult({**body, "offset": args.offset, "html": chunk, "next_offset": end if end < len(html) else None})


def _listing(ctx: RunContext, args: ListArgs, family: str, keep: Callable[[dict[str, Any]], bool],
             shape: Callable[[Capture, dict[str, Any]], dict[str, Any]]) -> ToolResult:
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    capture = _capture(ctx)
    if capture is None:
        return ToolResult({"captured": False, "note": NOTHING_CAPTURED, "items": [], "total": 0, "offset": 0,
                           "returned": 0})
    if args.step is not None and args.journey is None:
        raise ToolError("invalid", "step: needs `journey` (step names repeat across journeys)", field="step")
    if args.journey is not None:
        _lookup("journey", lambda: capture.summary(str(args.journey)))
    reader: Callable[..., list[dict[str, Any]]] = getattr(capture, family)
    entries = _lookup("step", lambda: reader(args.journey, args.step))
    items = [shape(capture, e) for e in entries if keep(e)]
    body, next_page = paging.page_of(items, cursor, args.limit, query)
    return ToolResult({"captured": True, **body}, next_page)


class ConsoleArgs(ListArgs):
    level: Literal["all", "warning", "error"] = Field("all", description="`error`: errors and uncaught page errors; "
                                                      "`warning`: those and warnings.")


def get_browser_console(ctx: RunContext, args: ConsoleArgs) -> ToolResult:
    wanted = {"all": None, "warning": {"warning", "error", "pageerror"}, "error": {"error", "pageerror"}}[args.level]

    def shape(capture: Capture, e: dict[str, Any]) -> dict[str, Any]:
        location = dict(e.get("location") or {})
        if "url" in location:
            location["url"] = _relative(capture, location["url"])
        return {**e, "location": location}

    return _listing(ctx, args, "console", lambda e: wanted is None or e.get("type") in wanted, shape)


class NetworkArgs(ListArgs):
    failed_only: bool = Field(False, description="Only requests that failed, were blocked or answered >= 400.")
    path_contains: str | None = Field(None, min_length=1, description="Only requests whose URL contains this text.")


def _failed(e: dict[str, Any]) -> bool:
    status = e.get("status")
    return bool(e.get("failure")) or bool(e.get("blocked")) or (isinstance(status, int) and status >= 400)


def get_network_requests(ctx: RunContext, args: NetworkArgs) -> ToolResult:
    def keep(e: dict[str, Any]) -> bool:
        return ((not args.failed_only or _failed(e))
                and (args.path_contains is None or args.path_contains in str(e.get("url") or "")))

    return _listing(ctx, args, "network", keep, lambda c, e: {**e, "url": _relative(c, e.get("url"))})


def get_browser_storage(ctx: RunContext, args: ListArgs) -> ToolResult:
    return _listing(ctx, args, "storage", lambda e: True, lambda c, e: e)


class SpansArgs(ListArgs):
    errors_only: bool = Field(False, description="Only spans whose status is error.")


def get_frontend_spans(ctx: RunContext, args: SpansArgs) -> ToolResult:
    def shape(capture: Capture, e: dict[str, Any]) -> dict[str, Any]:
        attributes = dict(e.get("attributes") or {})
        if "http.url" in attributes:
            attributes["http.url"] = _relative(capture, attributes["http.url"])
        return {**e, "attributes": attributes}

    return _listing(ctx, args, "spans", lambda e: not args.errors_only or e.get("status") == "error", shape)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_cuj_report", "The critical user journeys a real browser ran on the application (browse, checkout, "
         "currency switch, recommendations): without `journey`, each journey's status and failing step; with it, "
         "every step (status, the assertion that failed with expected and actual, URL, timing, evidence ids).",
         JourneyArgs, "observe", "browser", get_cuj_report),
    Tool("view_screenshot", "The screenshot of one journey step (PNG, as an image over MCP; base64 `data` over "
         "REST).", StepArgs, "observe", "browser", view_screenshot),
    Tool("get_browser_console", "The browser console of the journeys: logs, warnings, errors and uncaught page "
         "errors with their source location. Paged.", ConsoleArgs, "observe", "browser", get_browser_console),
    Tool("get_network_requests", "The requests the browser made on the journeys (HAR-like: method, URL, resource "
         "type, status or failure, timing, selected headers incl. traceparent, small JSON bodies). Paged.",
         NetworkArgs, "observe", "browser", get_network_requests),
    Tool("get_dom_snapshot", "The page's HTML at the end of one journey step, whole (in chunks) or as snippets "
         "around a text.", DomArgs, "observe", "browser", get_dom_snapshot),
    Tool("get_browser_storage", "Cookies, localStorage and sessionStorage after each journey step. Paged.",
         ListArgs, "observe", "browser", get_browser_storage),
    Tool("get_frontend_spans", "Spans the pages recorded in the browser (page loads, user interactions, fetch "
         "calls with their traceId: get_traces finds the backend's side of the same trace). Paged.",
         SpansArgs, "observe", "browser", get_frontend_spans),
)
