"""The static HTML report: well-formed, self-contained, one chart per section, the right numbers;
and rendered by a real browser (headless Chromium)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic_runs import LABEL_A, LABEL_B, SCENARIOS, Clock, populate, record

from orchestrator import charts, report, results
from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

SECTIONS = ["leaderboard", "pass-rate", "complexity", "ntam", "agent-time", "traces"]  # SRE runs only
SVG = "{http://www.w3.org/2000/svg}"



@pytest.fixture
def html() -> str:
    populate()
    return report.render(results.load_trials())


class Outline(HTMLParser):
    """Sections in order, the charts inside each, and whether every opened element was closed."""

    VOID = frozenset({"meta", "br", "wbr", "img", "input", "link", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.charts: dict[str, list[str]] = {}
        self.stack: list[str] = []
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += attrs
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a["id"] or "")
            self.charts[a["id"] or ""] = []
        if tag == "svg" and self.sections:
            self.charts[self.sections[-1]].append(a.get("data-chart") or "")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += attrs

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


def _outline(html: str) -> Outline:
    parser = Outline()
    parser.feed(html)
    parser.close()
    assert parser.stack == [], f"unclosed: {parser.stack}"
    return parser


def _svgs(html: str) -> dict[str, ET.Element]:
    found = {}
    for text in re.findall(r"<svg\b.*?</svg>", html, flags=re.DOTALL):
        root = ET.fromstring(text)  # each chart is well-formed XML
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
        found[root.attrib["data-chart"]] = root
    return found


def test_one_chart_per_section(html: str) -> None:
    outline = _outline(html)
    assert outline.sections == SECTIONS
    assert outline.charts == {s: [s] for s in SECTIONS}
    assert set(_svgs(html)) == set(SECTIONS)


def test_self_contained(html: str) -> None:
    outline = _outline(html)
    assert not outline.tags & {"script", "link", "img", "iframe", "object"}
    assert not [v for k, v in outline.attrs if k == "src" or (k == "href" and not (v or "").startswith("#"))]
    assert re.findall(r"https?://[^\"' ]+", html) == ["http://www.w3.org/2000/svg"] * len(SECTIONS)  # namespaces only
    assert "url(" not in html and "@import" not in html


def test_scenarios_and_agents_appear(html: str) -> None:
    svgs = _svgs(html)
    labels = {t.text for t in svgs["pass-rate"].iter(f"{SVG}text")}
    assert set(SCENARIOS) <= labels and {LABEL_A, LABEL_B} <= labels
    assert {"Easy", "Medium", "Hard"} <= {t.text for t in svgs["complexity"].iter(f"{SVG}text")}
    assert {"traces on", "traces off"} <= {t.text for t in svgs["traces"].iter(f"{SVG}text")}
    for scenario in SCENARIOS:
        assert f"<td class=\"l\">{scenario}</td>" in html
    text = re.sub(r"<[^>]+>", "", html)
    assert "27.78 ± 16.67" in text and "50.00 ± 28.87" in text  # the leaderboard table


def _bars(svg: ET.Element) -> dict[str, float]:
    return {(r.find(f"{SVG}title").text or ""): float(r.attrib["width"])  # type: ignore[union-attr]
            for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") == "bar"}


def test_bar_lengths_follow_the_numbers(html: str) -> None:
    bars = _bars(_svgs(html)["pass-rate"])
    assert len(bars) == 5  # (scenario, agent) pairs with trials
    full = bars[f"s-easy / {LABEL_B}: 100%"]
    assert bars[f"s-easy / {LABEL_A}: 50%"] == pytest.approx(full / 2, abs=0.1)
    assert bars[f"s-hard / {LABEL_A}: 0%"] == 0
    times = _bars(_svgs(html)["agent-time"])
    assert times[f"s-easy / {LABEL_A}: 65s"] == pytest.approx(13 * times[f"s-easy / {LABEL_B}: 15s"] / 3, abs=0.2)


def test_ntam_histogram_counts(html: str) -> None:
    titles = [r.find(f"{SVG}title").text for r in _svgs(html)["ntam"].iter(f"{SVG}rect")  # type: ignore[union-attr]
              if r.attrib.get("class") == "bar"]
    assert len(titles) == 20  # 10 bins x FL, FPC
    # 13 trials: 5 correct score FL 1.0 (the last bin holds 1.0), 5 wrong 0.3 (exactly on a bin edge),
    # 3 no submission / malformed 0.
    assert {"FL (NTAM) [0.9, 1.0): 5", "FL (NTAM) [0.3, 0.4): 5", "FL (NTAM) [0.0, 0.1): 3",
            "FPC (NTAM) [0.8, 0.9): 5", "FPC (NTAM) [0.2, 0.3): 5", "FPC (NTAM) [0.0, 0.1): 3"} <= set(titles)
    assert sum(int(t.rsplit(": ", 1)[1]) for t in titles) == 2 * 13  # type: ignore[union-attr]


def test_empty_report_is_well_formed() -> None:
    html = report.render([])
    outline = _outline(html)
    assert outline.sections == ["no-runs"] and outline.charts == {"no-runs": []}
    assert "<table" not in html and "<svg" not in html


def test_names_are_escaped() -> None:
    record("x1", "/opt/a<b>&c --model 'x\"y'", "s-easy", "correct", 5.0, Clock())
    html = report.render(results.load_trials())
    _outline(html)
    _svgs(html)
    assert "a&lt;b&gt;&amp;c" in html and "a<b>" not in html


def test_nice_axis_maxima() -> None:
    assert [charts.nice_scale(v) for v in (0, 0.3, 1, 7, 65, 120, 260)] == [
        (1, 0.25), (pytest.approx(0.3), 0.1), (1, 0.25), (8, 2), (80, 20), (150, 50), (300, 100)]


def test_report_command(tmp_path: Path) -> None:
    populate()
    out = tmp_path / "out" / "r.html"
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--agent", LABEL_B])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out} (4 run(s))"
    assert LABEL_B in out.read_text() and LABEL_A not in out.read_text()


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("OPSBENCH_SKIP_BROWSER_TESTS") == "1":
            pytest.skip("no chromium, and OPSBENCH_SKIP_BROWSER_TESTS=1 asks to skip the browser check")
        pytest.fail("chromium is not installed: `apt-get install chromium` (Debian) to render the report in a "
                    "browser, or set OPSBENCH_SKIP_BROWSER_TESTS=1 to skip this test deliberately")
    return found


def test_chromium_renders_the_charts(html: str, tmp_path: Path) -> None:
    browser = _chromium()
    page = tmp_path / "report.html"
    page.write_text(html)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    charts_in_dom = re.findall(r'<svg [^>]*class="chart" data-chart="([a-z-]+)"', dom)
    assert charts_in_dom == SECTIONS, dom[:500]
    assert dom.count('class="bar"') == html.count('class="bar"') and "s-hard" in dom
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, "--window-size=1200,3000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
