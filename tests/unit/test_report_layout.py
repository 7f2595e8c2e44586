"""The HTML report fits a 1280-px browser window, checked in real headless Chromium (Debian's, driven by
Playwright): the page never scrolls sideways, wide tables scroll inside their own box, and every chart is
drawn, with data marks, at a non-zero size within the window (and scales down in a narrower one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import populate_wide

from orchestrator import report, results

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

WIDTH, HEIGHT = 1280, 900
CHROMIUM = "/usr/bin/chromium"
SETUP = "`make setup` installs it (pip extras `dev`; chromium via roles/bootstrap_host)"
SECTIONS = ["leaderboard", "pass-rate", "ntam", "agent-time", "complexity", "traces"]

# Per table: the box it scrolls in, and whether that box is what scrolls. Per chart: its box and its data marks.
MEASURE = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width,
                                                                  height: r.height}; };
  return {
    tables: [...document.querySelectorAll('table')].map(t => {
      const wrap = t.parentElement;
      return {wrap: box(wrap), table: box(t), overflowX: getComputedStyle(wrap).overflowX,
              scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth};
    }),
    charts: [...document.querySelectorAll('svg.chart')].map(s => ({
      name: s.dataset.chart, box: box(s),
      marks: [...s.querySelectorAll('.bar')].filter(m => { const r = m.getBoundingClientRect();
                                                           return r.width > 0 && r.height > 0; }).length,
    })),
  };
}"""



@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"playwright is not installed: {SETUP}")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: {SETUP}")
    with sync_playwright() as p:
        # Debian's chromium, never Playwright's own download (`playwright install` cannot fetch browsers here).
        chromium = p.chromium.launch(executable_path=CHROMIUM, timeout=120_000, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        try:
            yield chromium
        finally:
            chromium.close()


def test_a_wide_report_fits_a_1280_px_window(browser: Any, tmp_path: Path) -> None:
    scenarios, agents = populate_wide(scenarios=40, agents=6)
    trials = results.load_trials()
    assert len(trials) == 240 and {t.agent for t in trials} == set(agents)
    page_file = tmp_path / "report.html"
    page_file.write_text(report.render(trials))

    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.goto(page_file.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    measured = page.evaluate(MEASURE)

    tables = measured["tables"]
    assert len(tables) == 5  # leaderboard, per scenario, agent time, two breakdowns
    for t in tables:
        assert t["wrap"]["left"] >= 0 and t["wrap"]["right"] <= WIDTH, t
        assert t["overflowX"] == "auto"
        assert t["scrollWidth"] >= t["table"]["width"] - 1, t  # the whole table is the box's to scroll
    # The data is wide enough that some tables are wider than the window: they scroll inside their box.
    assert any(t["table"]["width"] > WIDTH and t["scrollWidth"] > t["clientWidth"] for t in tables)

    charts = measured["charts"]
    assert [c["name"] for c in charts] == SECTIONS
    for c in charts:
        assert c["box"]["width"] > 0 and c["box"]["height"] > 0, c
        assert c["box"]["left"] >= 0 and c["box"]["right"] <= WIDTH, c
        assert c["marks"] > 0, c
    marks = {c["name"]: c["marks"] for c in charts}
    assert marks["leaderboard"] == 6 and marks["ntam"] > 0
    # One trial per (scenario, agent): a bar of zero length is a 0 % cell, all others are drawn.
    zero = sum(t.outcome != "correct" for t in trials)
    assert marks["pass-rate"] == 240 - zero and marks["agent-time"] == 240

    # Charts scale to their container: in a narrow window the wide ones shrink rather than overflow.
    page.set_viewport_size({"width": 640, "height": HEIGHT})
    assert page.evaluate("document.documentElement.scrollWidth") <= 640
    narrow = page.evaluate(MEASURE)["charts"]
    for wide, small in zip(charts, narrow, strict=True):
        assert small["box"]["right"] <= 640 and small["marks"] == wide["marks"], small
    assert any(small["box"]["width"] < wide["box"]["width"] for wide, small in zip(charts, narrow, strict=True))
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = page.content()
    assert len(scenarios) == 40 and all(s in html for s in scenarios)
