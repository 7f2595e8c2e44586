"""The HTML report fits a 1280-px browser window, checked in real headless Chromium (Debian's, driven by
Playwright): the page never scrolls sideways, no leaderboard column (nor any other table's) is cut off, a table
too wide for a narrow window scrolls inside its own box with its first column kept in view, and every chart is
drawn, with data marks, at a non-zero size within the window (and scales down in a narrower one).

With OPSBENCH_REPORT_SHOTS=DIR, the 1280-px screenshots of a report of every domain and of the empty report are
kept in DIR (report-all-domains.png, report-empty.png, and one per section) to be looked at."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import populate, populate_wide
from test_report_domains import populate_domains

from orchestrator import report, results

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

WIDTH, HEIGHT = 1280, 900
SECTIONS = ["leaderboard", "pass-rate", "complexity", "ntam", "agent-time", "traces"]

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
    assert len(tables) == 5  # leaderboard, per scenario, complexity, agent time, traces
    for t in tables:
        assert t["wrap"]["left"] >= 0 and t["wrap"]["right"] <= WIDTH, t
        assert t["overflowX"] == "auto"
        assert t["scrollWidth"] >= t["table"]["width"] - 1, t  # the whole table is the box's to scroll
        # Long names and "mean ± se" wrap, so even 14 columns of 70-character names fit: nothing to scroll.
        assert t["scrollWidth"] <= t["clientWidth"] + 1, t

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


# Per visible table: its scroll box, and each cell's box and whether its content is wider than the cell.
CELLS = """() => [...document.querySelectorAll('table')].filter(t => t.offsetParent !== null).map(t => {
  const wrap = t.closest('.wide'), w = wrap.getBoundingClientRect();
  return {section: t.closest('section').id, box: {left: w.left, right: w.right},
          scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth,
          headers: [...t.querySelectorAll('th')].map(c => c.textContent),
          cells: [...t.querySelectorAll('th, td')].map(c => { const r = c.getBoundingClientRect();
            return {text: c.textContent, left: r.left, right: r.right, clipped: c.scrollWidth > c.clientWidth + 1}; })};
})"""


def _open(browser: Any, html: str, tmp_path: Path, name: str, width: int = WIDTH) -> Any:
    page_file = tmp_path / f"{name}.html"
    page_file.write_text(html)
    page = browser.new_page(viewport={"width": width, "height": HEIGHT})
    page.goto(page_file.as_uri())
    return page


def _shots(page: Any, name: str, sections: list[str]) -> None:
    """Screenshots for a person to look at, when OPSBENCH_REPORT_SHOTS names a directory."""
    where = os.environ.get("OPSBENCH_REPORT_SHOTS")
    if not where:
        return
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    for sid in sections:
        page.locator(f"#{sid}").screenshot(path=str(out / f"{name}-{sid}.png"))


def test_no_leaderboard_column_is_cut_off_at_1280_px(browser: Any, tmp_path: Path) -> None:
    _, agents = populate_wide(scenarios=12, agents=6)
    populate()
    populate_domains(prefix="x")
    html = report.render(results.load_trials())
    sections = re.findall(r'<section id="([a-z-]+)"', html)
    assert sections == ["leaderboard", "domains", "pass-rate", "complexity", "ntam", "agent-time", "traces", "cuj",
                        "ciso", "finops", "devops"]
    page = _open(browser, html, tmp_path, "all")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")  # per-scenario tables too
    tables = page.evaluate(CELLS)
    assert {t["section"] for t in tables} == set(sections) - {"ntam"}
    leaderboard = next(t for t in tables if t["section"] == "leaderboard")
    assert leaderboard["headers"][:4] == ["Agent", "Scenarios", "Trials", "pass@1 (%)"]
    assert {c["text"] for c in leaderboard["cells"]} >= set(agents)  # every agent's full label, no ellipsis
    for t in tables:
        assert t["box"]["left"] >= 0 and t["box"]["right"] <= WIDTH, t["section"]
        assert t["scrollWidth"] <= t["clientWidth"] + 1, f"{t['section']}: the table is wider than its box"
        for c in t["cells"]:
            assert t["box"]["left"] - 1 <= c["left"] and c["right"] <= t["box"]["right"] + 1, (t["section"], c)
            assert not c["clipped"], (t["section"], c)
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    _shots(page, "report-all-domains", sections)


def test_a_table_too_wide_for_the_window_scrolls_with_its_first_column_in_view(browser: Any, tmp_path: Path) -> None:
    populate_wide(scenarios=6, agents=3)
    page = _open(browser, report.render(results.load_trials()), tmp_path, "narrow", width=480)
    assert page.evaluate("document.documentElement.scrollWidth") <= 480
    scrolled = page.evaluate("""() => [...document.querySelectorAll('.wide')].filter(w => w.scrollWidth > w.clientWidth)
      .map(w => { w.scrollLeft = w.scrollWidth; const box = w.getBoundingClientRect();
        const first = w.querySelector('tbody td').getBoundingClientRect();
        const last = [...w.querySelectorAll('th')].pop().getBoundingClientRect();
        return {section: w.closest('section').id, left: box.left, right: box.right, first: first.left,
                firstRight: first.right, last: last.right}; })""")
    assert {s["section"] for s in scrolled} >= {"leaderboard", "pass-rate"}  # 480 px is too narrow for them
    for s in scrolled:
        assert abs(s["first"] - s["left"]) <= 1 and s["firstRight"] > s["left"] + 20, s  # the name column stays
        assert s["last"] <= s["right"] + 1, s  # and the last column can be scrolled into view


def test_the_empty_report_at_1280_px(browser: Any, tmp_path: Path) -> None:
    page = _open(browser, report.render([]), tmp_path, "empty")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    box = page.locator("#no-runs").bounding_box()
    assert box and box["width"] > 300 and box["x"] + box["width"] <= WIDTH
    assert "opsbench run <scenario>" in page.locator("#no-runs pre").inner_text()
    pre = page.evaluate("(() => { const p = document.querySelector('#no-runs pre'); "
                        "return [p.scrollWidth, p.clientWidth]; })()")
    assert pre[0] <= pre[1] + 1, pre  # the commands are not cut off either
    _shots(page, "report-empty", [])
