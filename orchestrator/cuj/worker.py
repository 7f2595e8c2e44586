"""The browser side of a CUJ run: a child process (``python -m orchestrator.cuj _worker``) that drives Chromium.

It reads its job from stdin ({base_url, out, action_timeout, chromium, journeys}), runs the journeys in order,
each in a fresh browser context (no cookies, no storage), and writes each journey's capture files after every step
(so a run killed on timeout leaves what it had). Progress goes to stdout as JSON lines, one event each; everything
else the process or Chromium prints goes to stderr (the parent keeps it as runner.log).

Only loopback hosts are reachable: every other request is aborted and recorded as blocked.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

from . import capture
from .journeys import HEALTH, Journey, Step, describe_action, describe_check, expected_of, journeys_from, verb_of

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 800}
REQUEST_HEADERS = ("content-type", "traceparent", "x-shop-user")
RESPONSE_HEADERS = ("content-type", "content-length", "cache-control")
POLL_S = 0.1
TRANSIENT = ("Execution context was destroyed", "Cannot find context with specified id", "navigat",
             "Target page, context or browser has been closed")

# In every JS expression of a journey: vars, $, $$, text, num.
HELPERS = """
const $ = s => document.querySelector(s);
const $$ = s => Array.from(document.querySelectorAll(s));
const el = x => typeof x === 'string' ? document.querySelector(x) : x;
const text = x => { const e = el(x); return e ? (e.innerText || e.textContent || '').replace(/\\s+/g, ' ').trim()
                                              : null; };
const num = (x, attr) => { const e = el(x); if (!e) return NaN;
  const s = attr ? e.getAttribute(attr) : text(e);
  const m = String(s === null ? '' : s).match(/-?\\d[\\d,]*(?:\\.\\d+)?/);
  return m ? Number(m[0].replace(/,/g, '')) : NaN; };
"""

OBSERVE = """([kind, sel, attr, all]) => {
  const els = Array.from(document.querySelectorAll(sel));
  const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
  const vis = e => e.getClientRects().length > 0 && (e.checkVisibility ? e.checkVisibility({visibilityProperty: true})
                                                                       : true);
  const txt = e => norm(e.innerText !== undefined && e.innerText !== '' ? e.innerText : e.textContent);
  const some = all ? els : els.slice(0, 1);
  const out = {count: els.length, values: []};
  if (kind === 'visible') out.values = els.slice(0, 1).map(vis);
  else if (kind === 'text') out.values = some.map(txt);
  else if (kind === 'value') out.values = els.slice(0, 1).map(e => e.value === undefined ? null : String(e.value));
  else if (kind === 'attribute') out.values = some.map(e => e.getAttribute(attr));
  else if (kind === 'number') out.values = els.slice(0, 1).map(e => attr ? e.getAttribute(attr) : txt(e));
  else if (kind === 'stop') out.values = els.filter(e => vis(e) && txt(e) !== '').slice(0, 1).map(txt);
  return out;
}"""

SPANS = """() => {
  const out = [];
  try { const w = window.opsbench && window.opsbench.spans; if (Array.isArray(w)) out.push(...w); } catch (e) {}
  try { const s = JSON.parse(sessionStorage.getItem('opsbench.spans') || '[]');
        if (Array.isArray(s)) out.push(...s); } catch (e) {}
  return JSON.parse(JSON.stringify(out));
}"""

STORAGE = """() => {
  const dump = get => { try { const s = get(), o = [];
    for (let i = 0; i < s.length; i++) { const k = s.key(i); o.push([k, s.getItem(k)]); } return o; }
    catch (e) { return []; } };
  return {local: dump(() => localStorage), session: dump(() => sessionStorage)};
}"""

STACK_LOCATION = re.compile(r"(https?://[^\s()]+):(\d+):(\d+)")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class StepFailed(Exception):
    """An action or assertion of the journey did not hold: the journey's verdict, not a runner problem."""

    def __init__(self, assertion: str, expected: Any, actual: Any) -> None:
        super().__init__(assertion)
        self.assertion, self.expected, self.actual = assertion, expected, actual


class StepError(Exception):
    """The step could not be carried out (page never loaded, site unreachable, broken journey expression)."""

    def __init__(self, message: str, what: str | None = None) -> None:
        super().__init__(message)
        self.what = what


def summary(exc: BaseException) -> str:
    """The first meaningful line of a Playwright error (without its call log)."""
    text = str(exc).split("Call log:", 1)[0].strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^[A-Za-z]+\.[A-Za-z_]+: ", "", first)


class Said(str):
    """An actual that is a description ("no element matches ..."), not a value the page showed: the report's
    message gives it as is, where a value is quoted."""


def _quote(value: Any) -> str:
    if isinstance(value, Said):
        return str(value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def parse_number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    m = NUMBER.search(str(value)) if value is not None else None
    return float(m.group().replace(",", "")) if m else None


class JourneyRun:
    """One journey in its own browser context, recording the evidence and writing the capture files."""

    def __init__(self, browser: Any, journey: Journey, job: dict[str, Any], emit: Callable[[dict[str, Any]], None]):
        self.browser, self.journey, self.emit = browser, journey, emit
        self.base_url = str(job["base_url"])
        base = urlsplit(self.base_url)
        self.origin = f"{base.scheme}://{base.netloc}"
        self.timeout = float(job["action_timeout"])
        self.dir = Path(job["out"]) / journey.name
        self.console: list[dict[str, Any]] = []
        self.network: list[dict[str, Any]] = []
        self.storage: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self.span_ids: set[str] = set()
        self.counters: dict[tuple[str, str], int] = {}
        self.requests: dict[int, dict[str, Any]] = {}
        self.blocked: set[int] = set()
        self.vars: dict[str, Any] = {}
        self.current = journey.steps[0].name
        self.closed = False
        self.started = time.time()
        self.status = "running"
        self.records: list[dict[str, Any]] = [
            {"index": i, "name": s.name, "status": "pending", "assertion": None, "expected": None, "actual": None,
             "error": None, "message": None, "url": None, "started": None, "duration_ms": None, "screenshot": None,
             "dom": None, "evidence_id": capture.step_id(journey.name, s.name)}
            for i, s in enumerate(journey.steps, 1)]
        self.page: Any = None

    # -- evidence recording -----------------------------------------------------------------------------------
    def _next_id(self, family: str) -> str:
        key = (family, self.current)
        self.counters[key] = self.counters.get(key, 0) + 1
        return f"{capture.ID_PREFIX[family]}:{self.journey.name}:{self.current}:{self.counters[key]}"

    def rel(self, url: str) -> str:
        """A URL of the site as its path and query; other hosts' URLs whole."""
        if url.startswith(self.origin + "/") or url == self.origin:
            parts = urlsplit(url)
            return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return url

    def on_route(self, route: Any) -> None:
        request = route.request
        host = urlsplit(request.url).hostname
        if host in LOOPBACK:
            route.continue_()
            return
        self.blocked.add(id(request))
        route.abort("blockedbyclient")

    def on_request(self, request: Any) -> None:
        if self.closed:
            return
        entry: dict[str, Any] = {
            "id": self._next_id("network"), "step": self.current, "method": request.method,
            "url": self.rel(request.url), "resource_type": request.resource_type, "status": None, "failure": None,
            "blocked": False, "started": round(time.time(), 3), "duration_ms": None,
            "request_headers": {k: v for k, v in request.headers.items() if k.lower() in REQUEST_HEADERS},
            "response_headers": {}, "response_size": None, "request_body": None, "response_body": None}
        if request.resource_type in ("fetch", "xhr"):
            self._body(entry, "request_body", request.post_data, capture.REQUEST_BODY_CAP)
        self.requests[id(request)] = entry
        self.network.append(entry)
        entry["_request"] = request  # keeps id(request) unique while the entry lives; dropped when written

    @staticmethod
    def _body(entry: dict[str, Any], key: str, raw: str | None, cap: int) -> None:
        if not raw:
            return
        try:
            parsed = json.loads(raw)
        except ValueError:
            return  # JSON bodies only
        if len(raw.encode("utf-8")) <= cap:
            entry[key] = parsed
        else:
            entry[key], _ = capture.cap_text(raw, cap)
            entry[f"{key}_truncated"] = True

    def _duration(self, request: Any, entry: dict[str, Any]) -> float:
        try:
            end = float(request.timing.get("responseEnd", -1))
        except Exception:  # timing is best effort
            end = -1
        return round(end if end >= 0 else (time.time() - entry["started"]) * 1000, 1)

    def on_finished(self, request: Any) -> None:
        entry = self.requests.get(id(request))
        if entry is None or self.closed:
            return
        entry["duration_ms"] = self._duration(request, entry)
        try:
            response = request.response()
        except Exception:  # the context may be closing
            response = None
        if response is None:
            return
        entry["status"] = response.status
        headers = response.headers
        entry["response_headers"] = {k: v for k, v in headers.items() if k.lower() in RESPONSE_HEADERS}
        try:
            if request.resource_type in ("fetch", "xhr") and "json" in headers.get("content-type", ""):
                body = response.body()
                entry["response_size"] = len(body)
                self._body(entry, "response_body", body.decode("utf-8", errors="replace"), capture.RESPONSE_BODY_CAP)
            else:
                entry["response_size"] = request.sizes().get("responseBodySize")
        except Exception:  # a body can be gone after a navigation
            pass

    def on_failed(self, request: Any) -> None:
        entry = self.requests.get(id(request))
        if entry is None or self.closed:
            return
        entry["duration_ms"] = self._duration(request, entry)
        failure = request.failure or "failed"
        if id(request) in self.blocked:
            host = urlsplit(request.url).hostname
            entry["blocked"] = True
            failure = f"blocked by the CUJ runner: {host} is not a loopback host ({failure})"
        entry["failure"] = failure

    def on_console(self, message: Any) -> None:
        if self.closed:
            return
        kind = {"warning": "warning", "error": "error", "assert": "error"}.get(message.type, "log")
        loc = message.location or {}
        self.console.append({
            "id": self._next_id("console"), "step": self.current, "type": kind, "text": message.text,
            "location": {"url": self.rel(str(loc.get("url") or "")), "line": loc.get("lineNumber"),
                         "column": loc.get("columnNumber")},
            "time": round(time.time(), 3)})

    def on_pageerror(self, error: Any) -> None:
        if self.closed:
            return
        name, msg = getattr(error, "name", ""), getattr(error, "message", str(error))
        stack = getattr(error, "stack", "")
        m = STACK_LOCATION.search(stack or "")
        location = ({"url": self.rel(m.group(1)), "line": int(m.group(2)), "column": int(m.group(3))} if m
                    else {"url": self.rel(self.page.url) if self.page else None, "line": None, "column": None})
        self.console.append({
            "id": self._next_id("console"), "step": self.current, "type": "pageerror",
            "text": f"{name}: {msg}" if name and not str(msg).startswith(name) else str(msg),
            "location": location, "time": round(time.time(), 3), "stack": (stack or "")[:2000] or None})

    def attach(self, page: Any) -> None:
        page.on("console", self.on_console)
        page.on("pageerror", self.on_pageerror)

    # -- the journey ----------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        context = self.browser.new_context(viewport=VIEWPORT, service_workers="block")
        try:
            context.set_default_timeout(self.timeout * 1000)
            context.set_default_navigation_timeout(self.timeout * 1000)
            context.route("**/*", self.on_route)
            context.on("request", self.on_request)
            context.on("requestfinished", self.on_finished)
            context.on("requestfailed", self.on_failed)
            context.on("page", self.attach)
            self.page = context.new_page()
            stopped = False
            for i, step in enumerate(self.journey.steps):
                if stopped:
                    self.records[i]["status"] = "skipped"
                    continue
                stopped = not self.run_step(i, step)
        finally:
            self._finish_pending()
            self.closed = True
            with contextlib.suppress(Exception):  # a crashed browser cannot close its context
                context.close()
        failed = next((r for r in self.records if r["status"] in ("failed", "error")), None)
        self.status = "passed" if failed is None else failed["status"]
        self.write()
        return self.report()

    def _finish_pending(self) -> None:
        for entry in self.network:
            if entry["status"] is None and entry["failure"] is None:
                entry["failure"] = "unfinished when the journey ended"

    def run_step(self, i: int, step: Step) -> bool:
        """Run one step; False when the journey stops here."""
        rec = self.records[i]
        self.current = step.name
        rec.update(status="running", started=round(time.time(), 3))
        self.emit({"event": "step", "phase": "start", "journey": self.journey.name, "index": i + 1,
                   "step": step.name, "of": len(self.journey.steps)})
        self.write()
        t0 = time.monotonic()
        try:
            for action in step.do:
                self.act(action)
            for check in step.expect:
                self.check(check)
            rec["status"] = "passed"
        except StepFailed as f:
            rec.update(status="failed", assertion=f.assertion, expected=f.expected, actual=f.actual)
            rec["message"] = (f"step {i + 1} {step.name!r} failed: {f.assertion}: expected {f.expected}, "
                              f"actual {_quote(f.actual)}")
        except StepError as e:
            rec.update(status="error", error=str(e), assertion=e.what)
            rec["message"] = f"step {i + 1} {step.name!r} could not run: {e}"
        except Exception as e:  # a browser or Playwright failure is this step's error
            rec.update(status="error", error=f"{type(e).__name__}: {summary(e)}")
            rec["message"] = f"step {i + 1} {step.name!r} could not run: {rec['error']}"
        rec["duration_ms"] = round((time.monotonic() - t0) * 1000, 1)
        self.capture_step(i, step)
        self.write()
        self.emit({"event": "step", "phase": "end", "journey": self.journey.name, "index": i + 1, "step": step.name,
                   "of": len(self.journey.steps), "status": rec["status"], "message": rec["message"],
                   "duration_ms": rec["duration_ms"]})
        return bool(rec["status"] == "passed")

    # -- actions --------------------------------------------------------------------------------------------------
    def act(self, action: dict[str, Any]) -> None:
        verb = verb_of(action)
        main = action[verb]
        seconds = float(action.get("timeout", self.timeout))
        ms = seconds * 1000
        what = describe_action(action)
        if verb == "goto":
            target = urljoin(self.base_url, main)
            try:
                self.page.goto(target, wait_until=action.get("wait_until", "load"), timeout=ms)
            except Exception as e:
                if "Timeout" in type(e).__name__ or "Timeout" in str(e).split("\n", 1)[0]:
                    self.stop_loading()
                    raise StepError(f"the page {target} did not finish loading within {seconds:g} s "
                                    "(navigation timeout)", what) from None
                raise StepError(f"navigation to {target} failed: {summary(e)}", what) from None
            return
        if verb == "remember":
            value = self.poll_value(str(action["js"]), seconds, what)
            self.vars[main] = value
            return
        locator = self.page.locator(main).first
        if verb == "wait_for":
            state = action.get("state", "visible")
            try:
                locator.wait_for(state=state, timeout=ms)
            except Exception as e:
                raise StepFailed(what, f"{main} {state} within {seconds:g} s", self.why_not(main, e)) from None
            return
        run: Callable[[], Any]
        if verb == "click":
            def run() -> Any:
                return locator.click(timeout=ms)
        elif verb == "fill":
            def run() -> Any:
                return locator.fill(action["value"], timeout=ms)
        else:
            def run() -> Any:
                return locator.select_option(action["value"], timeout=ms)
        if not action.get("navigates"):
            try:
                run()
            except Exception as e:
                raise StepFailed(what, f"to {verb} {main} within {seconds:g} s", self.why_not(main, e)) from None
            return
        before = self.page.url
        acted = False
        try:
            with self.page.expect_navigation(timeout=ms):
                run()
                acted = True
        except Exception as e:
            if not acted:
                raise StepFailed(what, f"to {verb} {main} within {seconds:g} s", self.why_not(main, e)) from None
            self.stop_loading()
            raise StepFailed(f"{what} loads a page", f"a page load within {seconds:g} s",
                             Said(f"no page loaded; the URL stayed {self.rel(before)}")) from None

    def stop_loading(self) -> None:
        """Abandon a navigation that timed out: while one is pending, reading the page (DOM, storage, spans)
        would wait for it (``Page.stopLoading`` runs no script in the page)."""
        with contextlib.suppress(Exception):
            self.page.context.new_cdp_session(self.page).send("Page.stopLoading")

    def why_not(self, selector: str, exc: BaseException) -> str:
        """Why an element could not be used, in words."""
        try:
            count = self.page.locator(selector).count()
        except Exception:
            return summary(exc)
        if count == 0:
            return Said(f"no element matches {selector}")
        return Said(f"{count} element(s) match, but: {summary(exc)}")

    def js_source(self, expression: str) -> str:
        return f"(vars) => {{ {HELPERS}\nreturn ({expression}); }}"

    def evaluate(self, expression: str) -> Any:
        """A journey's JS expression in the page; StepError for one that does not compile."""
        try:
            return self.page.evaluate(self.js_source(expression), self.vars)
        except Exception as e:
            if "SyntaxError" in str(e):
                raise StepError(f"the journey's JS expression does not compile: {expression} ({summary(e)})") \
                    from None
            raise

    def poll_value(self, expression: str, seconds: float, what: str) -> Any:
        deadline = time.monotonic() + seconds
        last: Any = None
        while True:
            try:
                value = self.evaluate(expression)
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    return value
                last = value
            except StepError:
                raise
            except Exception as e:  # e.g. null.href while the page renders
                last = Said(f"the expression threw: {summary(e)}")
            if time.monotonic() >= deadline:
                raise StepFailed(what, "a value", "NaN" if isinstance(last, float) else last)
            self.page.wait_for_timeout(POLL_S * 1000)

    # -- assertions -----------------------------------------------------------------------------------------------
    def check(self, check: dict[str, Any]) -> None:
        kind = verb_of(check)
        if kind in HEALTH:
            self.health(check, kind)
            return
        seconds = float(check.get("timeout", self.timeout))
        deadline = time.monotonic() + seconds
        while True:
            equals: float | None = None
            try:
                ok, actual, equals = self.judge(check, kind)
            except StepError:
                raise
            except Exception as e:
                if not any(t in str(e) for t in TRANSIENT) and kind != "js":
                    raise
                ok, actual = False, Said(f"the page could not be read: {summary(e)}")
            if ok:
                return
            stop = check.get("stop_if")
            shown = self.observe("stop", stop)["values"] if stop else []
            if shown:
                raise StepFailed(describe_check(check), expected_of(check, equals),
                                 Said(f"{_quote(actual)}, while the page shows {stop}: {_quote(shown[0])}"))
            if time.monotonic() >= deadline:
                raise StepFailed(describe_check(check), expected_of(check, equals), actual)
            self.page.wait_for_timeout(POLL_S * 1000)

    def observe(self, kind: str, selector: str, attr: str | None = None, every: bool = False) -> dict[str, Any]:
        try:
            result = self.page.evaluate(OBSERVE, [kind, selector, attr, every])
        except Exception as e:
            if "is not a valid selector" in str(e):
                raise StepError(f"{selector!r} is not a valid CSS selector") from None
            raise
        return dict(result)

    def judge(self, check: dict[str, Any], kind: str) -> tuple[bool, Any, float | None]:
        """(holds, what was seen, the evaluated ``equals`` of a number check)."""
        sel = str(check[kind])
        if kind == "url":
            current = self.rel(self.page.url)
            return bool(re.search(sel, current)), current, None
        if kind == "js":
            try:
                ok = bool(self.evaluate(f"!!({sel})"))
            except StepError:
                raise
            except Exception as e:
                return False, Said(f"the expression threw: {summary(e)}"), None
            if ok:
                return True, None, None
            if check.get("actual"):
                try:
                    return False, self.evaluate(str(check["actual"])), None
                except StepError:
                    raise
                except Exception as e:
                    return False, f"the actual expression threw: {summary(e)}", None
            return False, False, None
        seen = self.observe(kind, sel, check.get("name") or check.get("attribute"), bool(check.get("all")))
        count, values = int(seen["count"]), list(seen["values"])
        if kind == "count_at_least":
            return count >= int(check["n"]), count, None
        if count == 0:
            return False, Said(f"no element matches {sel}"), None
        if kind == "visible":
            return bool(values and values[0]), Said(f"the first of {count} matching element(s) is hidden"), None
        if kind in ("text", "value", "attribute"):
            pattern = str(check["matches"])
            for i, v in enumerate(values):
                if v is None or not re.search(pattern, str(v)):
                    shown: Any = Said("no such attribute") if v is None and kind == "attribute" else v
                    if check.get("all") and count > 1:
                        shown = Said(f"element {i + 1} of {count}: {_quote(shown)}")
                    return False, shown, None
            return True, values[0], None
        # number
        raw = values[0] if values else None
        n = parse_number(raw)
        equals: float | None = None
        if isinstance(check.get("equals"), str):
            equals = parse_number(self.evaluate(str(check["equals"])))
            if equals is None:
                raise StepFailed(describe_check(check), expected_of(check),
                                 Said(f"the expected value {check['equals']} is not a number "
                                      f"(remembered: {self.vars})"))
        elif "equals" in check:
            equals = float(check["equals"])
        if n is None:
            return False, Said(f"no number in {_quote(raw)}"), equals
        ok = ((equals is None or abs(n - equals) <= float(check.get("tolerance", 0.01)) + 1e-9)
              and ("above" not in check or n > check["above"])
              and ("min" not in check or n >= check["min"])
              and ("max" not in check or n <= check["max"]))
        return ok, n, equals

    def health(self, check: dict[str, Any], kind: str) -> None:
        with contextlib.suppress(Exception):
            self.page.wait_for_timeout(50)  # let pending console and network events arrive
        scope = check[kind]
        mine = (lambda e: True) if scope == "journey" else (lambda e: e["step"] == self.current)
        if kind == "no_console_errors":
            bad = [e for e in self.console if e["type"] in ("error", "pageerror") and mine(e)]
            lines = [f"{e['id']} {_quote(e['text'])}" for e in bad]
            noun = "console error(s)"
        else:
            pattern = check.get("matching")
            bad = [e for e in self.network if mine(e) and (e["failure"] or (e["status"] or 0) >= 400)
                   and (not pattern or re.search(str(pattern), e["url"]))]
            lines = [f"{e['id']} {e['method']} {e['url']} -> {e['status'] or e['failure']}" for e in bad]
            noun = "failed request(s)"
        if bad:
            more = f"; and {len(lines) - 3} more" if len(lines) > 3 else ""
            raise StepFailed(describe_check(check), expected_of(check),
                             Said(f"{len(bad)} {noun}: " + "; ".join(lines[:3]) + more))

    # -- captures -------------------------------------------------------------------------------------------------
    def capture_step(self, i: int, step: Step) -> None:
        rec = self.records[i]
        problems: list[str] = []
        page = self.page
        try:
            rec["url"] = self.rel(page.url)
        except Exception as e:
            problems.append(f"url: {summary(e)}")
        shot = capture.screenshot_name(i + 1, step.name)
        try:
            capture.write_bytes(self.dir / shot, page.screenshot(full_page=False, timeout=self.timeout * 1000))
            rec["screenshot"] = shot
        except Exception as e:
            problems.append(f"screenshot: {summary(e)}")
        dom = capture.dom_name(i + 1, step.name)
        try:
            html, cut = capture.cap_text(page.content(), capture.DOM_CAP)
            if cut:
                html += f"\n<!-- truncated by the CUJ runner at {capture.DOM_CAP} bytes -->\n"
            capture.write_bytes(self.dir / dom, html.encode("utf-8"))
            rec["dom"] = dom
        except Exception as e:
            problems.append(f"dom: {summary(e)}")
        try:
            self.capture_storage(page)
        except Exception as e:
            problems.append(f"storage: {summary(e)}")
        try:
            self.capture_spans(page)
        except Exception as e:
            problems.append(f"spans: {summary(e)}")
        if problems:
            rec["capture_errors"] = problems

    def capture_storage(self, page: Any) -> None:
        base = f"storage:{self.journey.name}:{self.current}"
        for c in page.context.cookies():
            self.storage.append({"id": f"{base}:cookie:{c['name']}", "step": self.current, "kind": "cookie",
                                 "name": c["name"], "value": c["value"], "domain": c.get("domain"),
                                 "path": c.get("path"), "httpOnly": c.get("httpOnly")})
        found = page.evaluate(STORAGE)
        for kind in ("local", "session"):
            for key, raw in found.get(kind, []):
                value, cut = capture.cap_text(str(raw), capture.STORAGE_VALUE_CAP)
                item = {"id": f"{base}:{kind}:{key}", "step": self.current, "kind": kind, "name": key,
                        "value": value}
                if cut:
                    item.update(truncated=True, size=len(str(raw).encode("utf-8")))
                self.storage.append(item)

    def capture_spans(self, page: Any) -> None:
        for span in page.evaluate(SPANS):
            if not isinstance(span, dict):
                continue
            key = str(span.get("spanId") or json.dumps(span, sort_keys=True))
            if key in self.span_ids:
                continue
            self.span_ids.add(key)
            self.spans.append({"id": self._next_id("spans"), "step": self.current, **span})

    def abort(self, message: str) -> dict[str, Any]:
        """The journey broke outside any step's handling: the running step is an error, the rest skipped."""
        for rec in self.records:
            if rec["status"] == "running":
                rec.update(status="error", error=message, message=f"step {rec['index']} {rec['name']!r}: {message}")
            elif rec["status"] == "pending":
                rec["status"] = "skipped"
        self.status = "error"
        report = self.report()
        if report["message"] is None:
            report["message"] = message
        capture.write_json(self.dir / capture.REPORT, report)
        return report

    def report(self) -> dict[str, Any]:
        failed = next((r for r in self.records if r["status"] in ("failed", "error")), None)
        return {"journey": self.journey.name, "description": self.journey.description, "status": self.status,
                "failed_step": failed["name"] if failed else None, "message": failed["message"] if failed else None,
                "started": round(self.started, 3), "duration_s": round(time.time() - self.started, 3),
                "vars": self.vars, "steps": self.records}

    def write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        clean = [{k: v for k, v in e.items() if not k.startswith("_")} for e in self.network]
        for name, data in (("console", self.console), ("network", clean), ("storage", self.storage),
                           ("spans", self.spans)):
            capture.write_json(self.dir / f"{name}.json", data)
        capture.write_json(self.dir / capture.REPORT, self.report())


def main(stdin: IO[str] | None = None) -> int:
    """The worker's entry: read the job, run the journeys, report events; 0 when it ran (whatever the verdicts),
    2 when the browser could not start."""
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints (ours, Playwright's, Chromium's) go to the log, never into the event stream
    sys.stdout = sys.stderr

    def emit(event: dict[str, Any]) -> None:
        events.write(json.dumps(event, default=str) + "\n")
        events.flush()

    job = json.load(stdin or sys.stdin)
    journeys = journeys_from(job["journeys"])
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=job["chromium"], headless=True, args=CHROMIUM_ARGS,
                                        timeout=60_000)
        except Exception as e:
            emit({"event": "fatal", "message": f"Chromium ({job['chromium']}) did not start: {summary(e)}"})
            return 2
        emit({"event": "browser", "chromium_version": browser.version})
        for journey in journeys:
            emit({"event": "journey", "journey": journey.name, "steps": len(journey.steps)})
            run = JourneyRun(browser, journey, job, emit)
            try:
                report = run.run()
            except Exception as e:  # a broken context is this journey's error, the others still run
                report = run.abort(f"the journey could not run: {type(e).__name__}: {summary(e)}")
            emit({"event": "journey-end", "journey": journey.name, "status": report["status"],
                  "failed_step": report["failed_step"], "message": report["message"],
                  "duration_s": report["duration_s"]})
        browser.close()
    emit({"event": "done"})
    return 0
