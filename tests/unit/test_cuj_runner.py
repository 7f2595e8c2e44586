"""The CUJ runner (orchestrator.cuj) in real headless Chromium against a tiny fixture site (tests/cuj_site/).

One run of several small journeys (given as data) is shared by most tests: a passing journey, one that meets
console errors, a button that does nothing, an API answering 500, a page loading non-loopback resources, a page
that never loads and a missing element. Separate runs prove the overall timeout (a page whose script loops
forever: the worker's processes are all killed and the report says where) and the setup errors (exit code 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cuj import CaptureError, CujError, Journey, RunResult, load_capture, run
from orchestrator.cuj import journeys as dsl
from orchestrator.cuj.journeys import (
    attribute,
    click,
    count_at_least,
    fill,
    goto,
    js,
    no_console_errors,
    no_failed_requests,
    number,
    remember,
    select,
    step,
    text,
    url,
    value,
    visible,
)
from orchestrator.cuj.runner import processes

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "cuj_site"
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"{CHROMIUM} is absent: `make setup` installs Debian's chromium")


def tid(name: str) -> str:
    return f'[data-testid="{name}"]'


class Handler(SimpleHTTPRequestHandler):
    """The fixture's static files plus a small API: /api/echo (POST JSON back), /api/fail (500), /never (hangs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, directory=str(SITE), **kwargs)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, body: object) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        if self.path.startswith("/api/fail"):
            self._json(500, {"error": "boom"})
        elif self.path.startswith("/never"):
            time.sleep(30)  # a page that never loads (the daemon thread dies with the server)
        else:
            super().do_GET()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self._json(200, {"echo": body})


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


PASS = dsl.journey("fixture-pass", "Everything works.", [
    step("open-home", do=[goto("/index.html")], expect=[
        visible(tid("title")),
        text(tid("title"), "^Fixture shop$"),
        count_at_least(tid("item"), 2),
        attribute(tid("item"), "data-price", r"^\d+\.\d+$", all=True),
        text(tid("price"), r"\bUSD$", all=True),
        number(tid("price"), min=12, max=13),
        number(tid("api-status"), attribute="data-amount", equals=42, tolerance=0),
        js("document.title === 'Fixture home'", says="the title is the fixture's"),
        url(r"^/index\.html$"),
    ]),
    step("press-go", do=[fill(tid("qty"), "2"), select(tid("choice"), "b"), click(tid("go")),
                         remember("price", f"num('{tid('price')}')")], expect=[
        text(tid("go-status"), "^Added 2$"),
        value(tid("choice"), "^b$"),
        value(tid("qty"), "^2$"),
    ]),
    step("open-item", do=[click(tid("item-link"), navigates=True)], expect=[
        url(r"^/item\.html\?id=A$"),
        text(tid("name"), "Alpha"),
        number(tid("item-price"), attribute="data-amount", equals="vars.price"),
        no_console_errors("journey"),
        no_failed_requests("journey"),
    ]),
])

JOURNEYS: list[Journey | dict[str, Any]] = [
    PASS,
    {"name": "fixture-console", "description": "Console errors are evidence; failing on them is a choice.",
     "steps": [
         {"name": "open", "do": [{"goto": "/console-error.html"}], "expect": [{"text": "h1", "matches": "Console"}]},
         {"name": "healthy", "expect": [{"no_console_errors": "journey"}]},
         {"name": "never-run", "expect": [{"visible": "h1"}]},
     ]},
    {"name": "fixture-dead", "description": "A button that does nothing.", "steps": [
        {"name": "press", "do": [{"goto": "/dead-button.html"}, {"click": tid("dead")}],
         "expect": [{"text": tid("result"), "matches": "^Done", "timeout": 1}]},
        {"name": "after", "expect": [{"visible": "body"}]},
    ]},
    {"name": "fixture-fetch500", "description": "An API call answers 500.", "steps": [
        {"name": "open", "do": [{"goto": "/fetch500.html"}], "expect": [{"text": tid("error"), "matches": "500"}]},
        {"name": "requests-ok", "expect": [{"no_failed_requests": "journey", "matching": "^/api/"}]},
    ]},
    {"name": "fixture-stop", "description": "stop_if ends the wait at the page's error.", "steps": [
        {"name": "open", "do": [{"goto": "/fetch500.html"}],
         "expect": [{"text": tid("result"), "matches": "^OK", "stop_if": tid("error"), "timeout": 8}]},
    ]},
    {"name": "fixture-external", "description": "Non-loopback requests are blocked.", "steps": [
        {"name": "open", "do": [{"goto": "/external.html"}],
         "expect": [{"attribute": "body", "name": "data-beacon", "matches": "failed"}]},
    ]},
    {"name": "fixture-never", "description": "A page that never loads.", "steps": [
        {"name": "open", "do": [{"goto": "/never", "timeout": 1}]},
    ]},
    {"name": "fixture-missing", "description": "A button that is not there.", "steps": [
        {"name": "press", "do": [{"goto": "/dead-button.html"}, {"click": "#nope", "timeout": 0.5}]},
    ]},
]


@pytest.fixture(scope="module")
def result(site: str, tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    lines: list[str] = []
    res = run(site, tmp_path_factory.mktemp("cuj") / "capture", JOURNEYS, timeout=60, action_timeout=4,
              progress=lines.append)
    res.index["_progress"] = lines
    return res


def test_statuses_and_exit_code(result: RunResult) -> None:
    assert result.statuses() == {
        "fixture-pass": "passed", "fixture-console": "failed", "fixture-dead": "failed", "fixture-fetch500": "failed",
        "fixture-stop": "failed", "fixture-external": "passed", "fixture-never": "error", "fixture-missing": "failed"}
    assert result.exit_code == 2  # a journey errored
    assert not result.timed_out and result.leftovers == []
    index = json.loads((result.out / "cuj.json").read_text())
    assert index["version"] == 1 and index["chromium_version"].split(".")[0].isdigit()
    assert index["finished"] >= index["started"] and index["duration_s"] > 0
    assert {j["name"]: j["failed_step"] for j in index["journeys"]}["fixture-dead"] == "press"
    progress = result.index["_progress"]
    assert any("fixture-pass 2/3 press-go: passed" in line for line in progress), progress


def test_a_passing_journey_reports_every_step(result: RunResult) -> None:
    cap = load_capture(result.out)
    report = cap.report("fixture-pass")
    assert [s["status"] for s in report["steps"]] == ["passed"] * 3
    assert report["vars"] == {"price": 12.5}
    first = report["steps"][0]
    assert first["index"] == 1 and first["url"] == "/index.html" and first["duration_ms"] > 0
    assert first["evidence_id"] == "cuj:fixture-pass:open-home"
    assert first["screenshot"] == "step-01-open-home.png" and first["dom"] == "dom-01-open-home.html"
    png = cap.screenshot("fixture-pass", "open-item")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size < 300_000  # the viewport only
    assert 'data-testid="go-status" role="status">Added 2</p>' in cap.dom("fixture-pass", "press-go")


def test_failing_assertions_read_as_sentences(result: RunResult) -> None:
    cap = load_capture(result.out)
    dead = cap.report("fixture-dead")
    press, after = dead["steps"]
    assert press["status"] == "failed" and after["status"] == "skipped"
    assert press["assertion"] == f"the text of {tid('result')} matches /^Done/"
    assert press["expected"] == "text matching /^Done/" and press["actual"] == ""
    assert press["message"] == (f"step 1 'press' failed: the text of {tid('result')} matches /^Done/: "
                                'expected text matching /^Done/, actual ""')
    assert dead["message"] == press["message"] and dead["failed_step"] == "press"
    assert after["screenshot"] is None and press["screenshot"]

    missing = cap.step("fixture-missing", "press")
    assert missing["status"] == "failed" and missing["assertion"] == "click #nope"
    assert missing["actual"] == "no element matches #nope"

    stop = cap.report("fixture-stop")
    assert stop["duration_s"] < 6  # did not wait out its 8 s
    assert stop["steps"][0]["actual"] == f'"", while the page shows {tid("error")}: "Error 500: boom"'


def test_console_errors_are_evidence_and_an_assertion_where_asked(result: RunResult) -> None:
    cap = load_capture(result.out)
    steps = cap.steps("fixture-console")
    assert [s["status"] for s in steps] == ["passed", "failed", "skipped"]
    entries = cap.console("fixture-console")
    by_type = {e["type"]: e for e in entries}
    assert set(by_type) == {"log", "warning", "error", "pageerror"}
    err = by_type["error"]
    assert err["id"].startswith("console:fixture-console:open:") and err["step"] == "open"
    assert err["text"] == "fixture console error" and err["location"]["url"] == "/console-error.html"
    assert isinstance(err["location"]["line"], int) and err["time"] > 0
    page_error = by_type["pageerror"]
    assert page_error["text"] == "Error: fixture uncaught" and page_error["location"]["url"] == "/console-error.html"
    healthy = steps[1]
    assert healthy["assertion"] == "no console errors during this journey"
    assert healthy["expected"] == "0 console errors"
    assert healthy["actual"].startswith("2 console error(s): console:fixture-console:open:")
    assert '"fixture console error"' in healthy["actual"] and "fixture uncaught" in healthy["actual"]


def test_network_capture_with_bodies_headers_and_ids(result: RunResult) -> None:
    cap = load_capture(result.out)
    net = cap.network("fixture-pass", "open-home")
    assert [e["id"] for e in net] == [f"net:fixture-pass:open-home:{n}" for n in range(1, len(net) + 1)]
    doc = next(e for e in net if e["url"] == "/index.html")
    assert doc["method"] == "GET" and doc["resource_type"] == "document" and doc["status"] == 200
    assert doc["response_headers"]["content-type"].startswith("text/html") and doc["response_size"] > 500
    assert doc["request_body"] is None and doc["response_body"] is None  # bodies of fetch/xhr only
    echo = next(e for e in net if e["url"] == "/api/echo")
    assert echo["resource_type"] == "fetch" and echo["status"] == 200 and echo["failure"] is None
    assert echo["request_body"] == {"hello": "world", "answer": 42}
    assert echo["response_body"] == {"echo": {"hello": "world", "answer": 42}}
    assert echo["request_headers"]["x-shop-user"] == "fixture-user"
    assert echo["request_headers"]["traceparent"].startswith("00-")
    assert set(echo["request_headers"]) == {"content-type", "traceparent", "x-shop-user"}
    assert echo["response_headers"]["content-type"] == "application/json" and echo["duration_ms"] >= 0

    failing = cap.network("fixture-fetch500")
    fail = next(e for e in failing if e["url"] == "/api/fail")
    assert fail["status"] == 500 and fail["response_body"] == {"error": "boom"} and fail["failure"] is None
    check = cap.step("fixture-fetch500", "requests-ok")
    assert check["status"] == "failed"
    assert check["actual"] == f"1 failed request(s): {fail['id']} GET /api/fail -> 500"


def test_non_loopback_requests_are_blocked_and_recorded(result: RunResult) -> None:
    cap = load_capture(result.out)
    blocked = [e for e in cap.network("fixture-external") if e["blocked"]]
    assert {e["url"] for e in blocked} == {"http://example.com/pixel.png", "http://192.0.2.1/beacon"}
    for e in blocked:
        assert e["status"] is None
        assert e["failure"].startswith("blocked by the CUJ runner: ") and "is not a loopback host" in e["failure"]


def test_storage_and_spans_per_step(result: RunResult) -> None:
    cap = load_capture(result.out)
    storage = {e["id"]: e for e in cap.storage("fixture-pass", "open-home")}
    cookie = storage["storage:fixture-pass:open-home:cookie:fixture_session"]
    assert cookie["value"] == "s3ss10n" and cookie["domain"] == "127.0.0.1" and cookie["httpOnly"] is False
    assert storage["storage:fixture-pass:open-home:local:fixture.key"]["value"] == "local-value"
    assert "storage:fixture-pass:open-home:session:opsbench.spans" in storage
    spans = cap.spans("fixture-pass")
    ids = [s["spanId"] for s in spans]
    assert len(ids) == len(set(ids)), "spans are deduplicated by spanId"
    names = [(s["step"], s["name"]) for s in spans]
    assert ("open-home", "documentLoad") in names and ("open-home", "POST /api/echo") in names
    assert ("open-item", "documentLoad") in names  # the item page's own load, after navigation
    echo_span = next(s for s in spans if s["name"] == "POST /api/echo")
    echo_req = next(e for e in cap.network("fixture-pass") if e["url"] == "/api/echo")
    assert echo_req["request_headers"]["traceparent"] == f"00-{echo_span['traceId']}-{echo_span['spanId']}-01"
    assert spans[0]["id"] == "span:fixture-pass:open-home:1"


def test_fresh_context_per_journey(result: RunResult) -> None:
    cap = load_capture(result.out)
    # the console page never sets a cookie: nothing carried over from fixture-pass
    assert cap.storage("fixture-console") == []


def test_a_page_that_never_loads_is_an_error_naming_the_url(result: RunResult, site: str) -> None:
    cap = load_capture(result.out)
    rec = cap.step("fixture-never", "open")
    assert rec["status"] == "error"
    assert rec["error"] == f"the page {site}/never did not finish loading within 1 s (navigation timeout)"
    assert cap.summary("fixture-never")["status"] == "error"


def test_reader_api_lookups_and_errors(result: RunResult) -> None:
    cap = load_capture(result.out)
    assert cap.journeys()[:2] == ["fixture-pass", "fixture-console"]
    assert cap.step_names("fixture-pass") == ["open-home", "press-go", "open-item"]
    with pytest.raises(CaptureError, match="has no step 'nope'; its steps: open-home, press-go, open-item"):
        cap.screenshot("fixture-pass", "nope")
    with pytest.raises(CaptureError, match="no journey 'nope' in this capture; its journeys: fixture-pass"):
        cap.report("nope")
    skipped = "step 'after' has no screenshot (it was skipped); steps with one: press"
    with pytest.raises(CaptureError, match=re.escape(skipped)):
        cap.screenshot("fixture-dead", "after")
    assert cap.find("cuj:fixture-dead:press")["status"] == "failed"
    first = cap.console("fixture-console")[0]
    assert cap.find(first["id"]) == first
    assert cap.find("screenshot:fixture-pass:open-home")["path"].endswith("step-01-open-home.png")
    assert "Fixture shop" in cap.find("dom:fixture-pass:open-home")["html"]
    assert len(cap.network()) == sum(len(cap.network(j)) for j in cap.journeys())
    with pytest.raises(CaptureError, match="holds no CUJ capture"):
        load_capture(result.out / "fixture-pass")


def test_journey_definitions_are_validated() -> None:
    with pytest.raises(CujError, match="kebab-case"):
        Journey.from_dict({"name": "Bad Name", "steps": [{"name": "a", "expect": [{"visible": "x"}]}]})
    with pytest.raises(CujError, match=r"step 1 \(a\) do\[0\]: an action needs exactly one of"):
        Journey.from_dict({"name": "j", "steps": [{"name": "a", "do": [{"jump": "/"}]}]})
    with pytest.raises(CujError, match="text: missing \\['matches'\\]"):
        Journey.from_dict({"name": "j", "steps": [{"name": "a", "expect": [{"text": "h1"}]}]})
    with pytest.raises(CujError, match="step names must be unique"):
        Journey.from_dict({"name": "j", "steps": [{"name": "a", "expect": [{"visible": "x"}]},
                                                  {"name": "a", "expect": [{"visible": "y"}]}]})
    assert {j.name for j in dsl.SHOP_JOURNEYS.values()} == {"browse", "checkout", "currency", "recommendations"}
    for journey in dsl.SHOP_JOURNEYS.values():  # round trip through data
        assert Journey.from_dict(json.loads(json.dumps(journey.to_dict()))) == journey


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cuj", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)


def test_setup_errors_exit_2_with_the_reason(site: str, tmp_path: Path) -> None:
    proc = _cli("run", "--base-url", site, "--out", str(tmp_path / "a"), "--chromium", "/nonexistent/chromium")
    assert proc.returncode == 2
    assert "Chromium is missing at /nonexistent/chromium" in proc.stderr and "make setup" in proc.stderr
    proc = _cli("run", "--base-url", site, "--out", str(tmp_path / "b"), "--journey", "nope")
    assert proc.returncode == 2
    assert "unknown journey(s) ['nope']; known journeys: browse, checkout, currency, recommendations" in proc.stderr
    with closed_port() as port:
        proc = _cli("run", "--base-url", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "c"))
    assert proc.returncode == 2 and f"base URL http://127.0.0.1:{port} is unreachable" in proc.stderr
    proc = _cli("run", "--base-url", "http://example.com", "--out", str(tmp_path / "d"))
    assert proc.returncode == 2 and "not on a loopback host" in proc.stderr


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, never listening: connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_cli_runs_journeys_from_a_file(site: str, tmp_path: Path) -> None:
    journeys = tmp_path / "journeys.json"
    journeys.write_text(json.dumps([
        {"name": "home", "steps": [{"name": "open", "do": [{"goto": "/index.html"}],
                                    "expect": [{"visible": tid("title")}]}]},
        {"name": "dead", "steps": [{"name": "press", "do": [{"goto": "/dead-button.html"}, {"click": tid("dead")}],
                                    "expect": [{"text": tid("result"), "matches": "Done", "timeout": 0.5}]}]},
    ]))
    out = tmp_path / "cap"
    proc = _cli("run", "--base-url", site, "--out", str(out), "--journeys-file", str(journeys), "--json")
    assert proc.returncode == 1, proc.stderr  # a journey failed
    index = json.loads(proc.stdout)
    assert [(j["name"], j["status"]) for j in index["journeys"]] == [("home", "passed"), ("dead", "failed")]
    assert "[cuj] home 1/1 open: passed" in proc.stderr and "[cuj] dead 1/1 press: failed" in proc.stderr
    assert f"the text of {tid('result')} matches /Done/: expected text matching /Done/, actual \"\"" in proc.stderr
    # the same directory again: the previous capture is replaced
    proc = _cli("run", "--base-url", site, "--out", str(out), "--journeys-file", str(journeys), "--journey", "home")
    assert proc.returncode == 0, proc.stderr
    assert load_capture(out).journeys() == ["home"] and not (out / "dead").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    proc = _cli("run", "--base-url", site, "--out", str(tmp_path / "other"), "--journeys-file", str(journeys))
    assert proc.returncode == 2 and "is not empty and holds no previous CUJ capture" in proc.stderr


def test_overall_timeout_kills_everything_and_says_where(site: str, tmp_path: Path) -> None:
    journeys = [
        {"name": "quick", "steps": [{"name": "open", "do": [{"goto": "/dead-button.html"}]}]},
        {"name": "hang", "steps": [
            {"name": "open-busy-page", "do": [{"goto": "/hang.html", "timeout": 60}]},
            {"name": "later", "expect": [{"visible": "h1"}]},
        ]},
        {"name": "unstarted", "steps": [{"name": "open", "do": [{"goto": "/index.html"}]}]},
    ]
    t0 = time.monotonic()
    res = run(site, tmp_path / "cap", journeys, timeout=8, action_timeout=30)
    elapsed = time.monotonic() - t0
    assert elapsed < 8 + 8, elapsed  # the timeout, then the kill within its grace periods
    assert res.exit_code == 2 and res.timed_out
    assert res.index["timed_out_at"] == {"journey": "hang", "step": "open-busy-page"}
    assert res.statuses() == {"quick": "passed", "hang": "timeout", "unstarted": "timeout"}
    assert res.leftovers == []
    assert len(res.sessions) >= 2  # the worker's own and Chromium's (Playwright starts it detached)
    alive = [p for p in processes() if p.sid in res.sessions and p.state not in ("Z", "X")]
    assert alive == []
    cap = load_capture(res.out)
    busy, later = cap.steps("hang")
    assert busy["status"] == "error" and later["status"] == "skipped"
    assert busy["error"] == "the run's overall timeout (8 s) expired during this step; the browser was killed"
    assert cap.summary("hang")["failed_step"] == "open-busy-page"
    assert cap.summary("unstarted")["message"].startswith("not run: the run's overall timeout (8 s) expired")
    assert cap.steps("unstarted")[0]["status"] == "skipped"
    assert cap.step("quick", "open")["screenshot"]
