"""The report's value axes: tick labels are right for sub-second and large values alike (a 0.3 s agent time
once read `0s` at every tick), and a bar's label never rounds a non-zero value to nothing."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st
from synthetic_runs import AGENT_A, AGENT_B, LABEL_A, Clock, record

from orchestrator import charts, report, results

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

SVG = "{http://www.w3.org/2000/svg}"
FACTORS = {"s": 1.0, "m": 60.0, "h": 3600.0, "k": 1e3, "M": 1e6, "G": 1e9, "%": 0.01, "": 1.0}


def _labels(top: float, kind: str, max_value: float | None = None) -> list[str]:
    return [label for _, label in charts.axis(top, kind, max_value).ticks]


def _value(label: str) -> float:
    """What a label says, in the axis's base unit (seconds, fractions for %)."""
    match = re.fullmatch(r"(-?[\d,]+(?:\.\d+)?)([a-zA-Z%]*)", label)
    assert match, label
    return float(match.group(1).replace(",", "")) * FACTORS[match.group(2)]


@pytest.mark.parametrize(("top", "kind", "labels"), [
    (0.3, "seconds", ["0s", "0.1s", "0.2s", "0.3s"]),
    (0.034, "seconds", ["0s", "0.01s", "0.02s", "0.03s", "0.04s"]),
    (65, "seconds", ["0s", "20s", "40s", "60s", "80s"]),
    (120, "seconds", ["0s", "50s", "100s", "150s"]),
    (7265, "seconds", ["0m", "50m", "100m", "150m"]),
    (50_000, "seconds", ["0h", "5h", "10h", "15h"]),
    (7, "number", ["0", "2", "4", "6", "8"]),
    (999, "number", ["0", "250", "500", "750", "1,000"]),
    (12_345, "number", ["0k", "5k", "10k", "15k"]),
    (1.2e6, "number", ["0M", "0.5M", "1.0M", "1.5M"]),
])
def test_tick_labels(top: float, kind: str, labels: list[str]) -> None:
    assert _labels(top, kind) == labels


def test_percent_axis_ends_at_100() -> None:
    assert _labels(0.3, "percent", 1.0) == ["0%", "25%", "50%", "75%", "100%"]
    assert _labels(0.003, "percent") == ["0%", "0.1%", "0.2%", "0.3%"]


@pytest.mark.parametrize(("value", "kind", "top", "label"), [
    (0.3, "seconds", 0.3, "0.3s"), (0.034, "seconds", 0.04, "0.034s"), (65, "seconds", 80, "65s"),
    (4000, "seconds", 7265, "67m"), (0.667, "percent", 1.0, "67%"), (0.004, "percent", 1.0, "0.4%"),
    (1_234_567, "number", 1.5e6, "1.2M"), (0, "seconds", 1, "0s"),
])
def test_bar_labels(value: float, kind: str, top: float, label: str) -> None:
    assert charts.axis(top, kind).label(value) == label


def test_an_unknown_axis_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="axis kind"):
        charts.axis(1.0, "furlongs")


@given(top=st.floats(min_value=1e-4, max_value=1e9), kind=st.sampled_from(["seconds", "number", "percent"]))
def test_every_axis_reads_true(top: float, kind: str) -> None:
    """From 0 to past the top in 2-5 equal steps; every label distinct and saying its tick's value."""
    scale = charts.axis(top, kind)
    values = [v for v, _ in scale.ticks]
    labels = [label for _, label in scale.ticks]
    assert values[0] == 0 and values[-1] >= top * (1 - 1e-9) and values[-1] == pytest.approx(scale.vmax)
    assert 3 <= len(values) <= 6 and len(set(labels)) == len(labels)
    steps = [b - a for a, b in itertools.pairwise(values)]
    assert all(s == pytest.approx(steps[0]) for s in steps)
    for value, label in scale.ticks:
        assert _value(label) == pytest.approx(value, rel=1e-6, abs=1e-12), (label, value)
    assert not re.fullmatch(r"0(\.0+)?[a-zA-Z%]*", scale.label(top))  # a non-zero value never reads as zero
    assert _value(scale.label(top)) == pytest.approx(top, rel=0.06)


def _ticks(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{SVG}text") if t.attrib.get("class") == "tick"]


def test_hbars_draws_the_axis_ticks_and_labels() -> None:
    svg = ET.fromstring(charts.hbars("t", "t", ["a", "b"], ["x"], {("a", "x"): (0.3, None), ("b", "x"): (0.1, 0.05)},
                                     kind="seconds"))
    ticks = _ticks(svg)
    assert ticks == ["0s", "0.1s", "0.2s", "0.3s"]
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "0.3s" in texts and "0.1s" in texts
    bars = {r.find(f"{SVG}title").text: float(r.attrib["width"])  # type: ignore[union-attr]
            for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") == "bar"}
    assert bars["a / x: 0.3s"] == pytest.approx(3 * bars["b / x: 0.1s"], abs=0.2)


def test_a_sub_second_report_reads_sub_second() -> None:
    clock = Clock()
    for i, (agent, seconds) in enumerate([(AGENT_A, 0.2), (AGENT_A, 0.4), (AGENT_B, 0.1)]):
        record(f"q{i}", agent, "s-easy", "correct", seconds, clock)
    html = report.render(results.load_trials())
    svg = ET.fromstring(re.search(r'<svg[^>]*data-chart="agent-time".*?</svg>', html, re.DOTALL).group(0))  # type: ignore[union-attr]
    assert _ticks(svg) == ["0s", "0.1s", "0.2s", "0.3s", "0.4s"]
    assert f"s-easy / {LABEL_A}: 0.3s" in {t.text for t in svg.iter(f"{SVG}title")}


def test_a_long_report_reads_in_minutes() -> None:
    record("long", AGENT_A, "s-easy", "correct", 5400.0, Clock())
    html = report.render(results.load_trials())
    svg = ET.fromstring(re.search(r'<svg[^>]*data-chart="agent-time".*?</svg>', html, re.DOTALL).group(0))  # type: ignore[union-attr]
    assert _ticks(svg) == ["0m", "25m", "50m", "75m", "100m"]
    assert f"s-easy / {LABEL_A}: 90m" in {t.text for t in svg.iter(f"{SVG}title")}


def test_decimals_and_short() -> None:
    assert [charts.decimals(s) for s in (20, 2.5, 0.25, 0.025, 1e-3)] == [0, 1, 2, 3, 3]
    assert [charts.short(v) for v in (0, 0.3, 0.034, 2.5, 9.96, 65.4, 12_345)] == [
        "0", "0.3", "0.034", "2.5", "10", "65", "12,345"]
    assert not math.isnan(charts.axis(float("nan"), "number").vmax)


def test_a_series_without_a_value_takes_no_row_and_keeps_its_colour() -> None:
    colors = {"x": "#111111", "y": "#222222"}
    svg = ET.fromstring(charts.hbars("t", "t", ["a", "b", "c"], ["x", "y"],
                                     {("a", "x"): (0.5, None), ("a", "y"): (0.25, None), ("b", "y"): (1.0, None)},
                                     kind="percent", max_value=1.0, colors=colors))
    bars = [(r.find(f"{SVG}title").text, r.attrib["fill"], float(r.attrib["y"]))  # type: ignore[union-attr]
            for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") == "bar"]
    assert [(t, f) for t, f, _ in bars] == [("a / x: 50%", "#111111"), ("a / y: 25%", "#222222"),
                                            ("b / y: 100%", "#222222")]
    assert bars[2][2] - bars[1][2] == pytest.approx(bars[1][2] - bars[0][2] + 12)  # b's group holds one bar, no gap
    assert [t.text for t in svg.iter(f"{SVG}text")].count("n/a") == 1  # c: nothing at all
    legend = [r.attrib["fill"] for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") != "bar"]
    assert legend == ["#111111", "#222222"]


def test_an_agent_keeps_its_colour_across_sections() -> None:
    from test_report_domains import populate_domains

    populate_domains(("CISO",))  # agent A passes 2 of 3 CISO assessments, B has one no submission
    clock = Clock()
    record("p2", AGENT_B, "s-easy", "correct", 10.0, clock)
    record("p3", AGENT_B, "s-hard", "wrong", 10.0, clock)
    html = report.render(results.load_trials())
    for chart, agents in (("pass-rate", 2), ("agent-time", 1), ("traces", 1), ("ciso", 2)):
        svg = ET.fromstring(re.search(rf'<svg[^>]*data-chart="{chart}".*?</svg>', html, re.DOTALL).group(0))  # type: ignore[union-attr]
        fills = {r.find(f"{SVG}title").text.split(" / ")[1].split(":")[0]: r.attrib["fill"]  # type: ignore[union-attr]
                 for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") == "bar"}
        assert len(fills) == agents and fills["llm-agent (gpt-4o)"] == charts.color(1), chart
        assert fills.get(LABEL_A, charts.color(0)) == charts.color(0), chart


def test_a_zero_bar_still_shows_whose_it_is() -> None:
    svg = ET.fromstring(charts.hbars("t", "t", ["a"], ["x", "y"], {("a", "x"): (0.0, None), ("a", "y"): (0.5, None)},
                                     kind="percent", max_value=1.0, colors={"x": "#111111", "y": "#222222"}))
    zero = [r.attrib["fill"] for r in svg.iter(f"{SVG}rect") if r.attrib.get("class") == "zero"]
    assert zero == ["#111111"]  # x's 0 %, in x's colour; y's bar needs no marker
