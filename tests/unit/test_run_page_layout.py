"""The per-run page and the report's ITBench-AA columns at 1280 px, in real headless Chromium (Debian's, driven by
Playwright, as tests/unit/test_report_layout.py): with every block expanded (arguments, answers, the prompt) the page
never scrolls sideways, no timeline row or table cell is cut off, long shell commands and answers wrap inside their
blocks, the answer and the ground truth stand side by side, and a screenshot answer is drawn.

With OPSBENCH_REPORT_SHOTS=DIR the 1280-px screenshots (run-page.png collapsed, run-page-open.png expanded,
report-runs.png the report's leaderboard and Runs section) are kept in DIR to be looked at."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from recorded_runs import command_trial, preset_trial

from orchestrator import report, results, run_page

pytestmark = pytest.mark.usefixtures("home")

WIDTH, HEIGHT = 1280, 900
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5Erk"
                       "Jggg==")

MEASURE = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width,
                                                                  height: r.height, top: r.top}; };
  return {
    scrollWidth: document.documentElement.scrollWidth,
    rows: [...document.querySelectorAll('#timeline tbody tr')].map(box),
    cells: [...document.querySelectorAll('td, th')].filter(c => c.offsetParent !== null).map(c => ({
      text: c.textContent.slice(0, 40), box: box(c), clipped: c.scrollWidth > c.clientWidth + 1})),
    pres: [...document.querySelectorAll('pre.v')].filter(p => p.offsetParent !== null).map(p => ({
      box: box(p), sideways: p.scrollWidth > p.clientWidth + 1})),
    cols: [...document.querySelectorAll('.cols > div')].map(box),
    shots: [...document.querySelectorAll('img.shot')].map(i => ({box: box(i), loaded: i.complete && i.naturalWidth})),
  };
}"""



def _shot(page: Any, name: str) -> None:
    where = os.environ.get("OPSBENCH_REPORT_SHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


def _fits(measured: dict[str, Any]) -> None:
    assert measured["scrollWidth"] <= WIDTH, measured["scrollWidth"]
    for row in measured["rows"]:
        assert row["left"] >= 0 and row["right"] <= WIDTH, row
    for cell in measured["cells"]:
        assert cell["box"]["right"] <= WIDTH and not cell["clipped"], cell
    for pre in measured["pres"]:
        assert pre["box"]["right"] <= WIDTH and not pre["sideways"], pre  # long lines wrap, never scroll sideways


def test_a_run_page_fits_1280_px_collapsed_and_with_every_block_open(browser: Any, tmp_path: Path) -> None:
    _, run_dir = preset_trial(tmp_path)
    # a long unbroken argument and a screenshot answer, the hardest cases for the width
    calls = run_dir / "gateway" / "model-calls.jsonl"
    records = [json.loads(line) for line in calls.read_text().splitlines()]
    records[0]["reply"]["tool_calls"][0]["arguments"]["command"] += "; echo " + "x" * 3000
    calls.write_text("".join(json.dumps(r) + "\n" for r in records))
    shot = run_dir / "cuj" / "checkout" / "step-01-open.png"
    shot.parent.mkdir(parents=True)
    shot.write_bytes(PNG)
    trajectory = run_dir / "gateway" / "trajectory.jsonl"
    [ok] = [json.loads(line) for line in trajectory.read_text().splitlines()]
    view = {**ok, "ts": ok["ts"] + 0.01, "tool": "view_screenshot", "args": {"journey": "checkout", "step": "open"}}
    trajectory.write_text(json.dumps(ok) + "\n" + json.dumps(view) + "\n")
    page_file = tmp_path / "run.html"
    page_file.write_text(run_page.render(run_dir))

    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(page_file.as_uri())
    collapsed = page.evaluate(MEASURE)
    _fits(collapsed)
    assert len(collapsed["rows"]) == 5 and all(r["height"] > 0 for r in collapsed["rows"])
    _shot(page, "run-page")

    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    opened = page.evaluate(MEASURE)
    _fits(opened)
    assert len(opened["pres"]) >= 8  # the prompt, arguments and answers, the answer and the ground truth
    left, right = opened["cols"]
    assert left["right"] <= right["left"] and abs(left["top"] - right["top"]) < 1  # side by side
    [picture] = opened["shots"]
    assert picture["loaded"] and picture["box"]["width"] > 0 and picture["box"]["right"] <= WIDTH
    _shot(page, "run-page-open")
    png = tmp_path / "run-page.png"
    page.screenshot(path=str(png), full_page=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_with_cost_columns_and_run_links_fits_1280_px(browser: Any, tmp_path: Path) -> None:
    preset_trial(tmp_path, "a-preset-trial-with-a-long-run-identifier-20261127-205929-120b37")
    command_trial(tmp_path, "a-command-agent-trial-with-a-long-run-identifier-20261127-205929")
    out = report.write(tmp_path / "report.html", results.load_trials(), run_pages=True)
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(out.as_uri())
    measured = page.evaluate(MEASURE)
    _fits(measured)
    headers = [c["text"] for c in measured["cells"]]
    assert "Cost per trial ($)" in headers and "Run page" in headers
    links = page.evaluate("() => [...document.querySelectorAll('#runs a')].map(a => a.href)")
    assert len(links) == 2 and all(Path(link.removeprefix("file://")).is_file() for link in links)
    _shot(page, "report-runs")
