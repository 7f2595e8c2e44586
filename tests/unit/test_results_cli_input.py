"""`results`, `leaderboard` and `report` on filters that match nothing and on output paths: what they say."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic_runs import populate

from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)


def test_a_filter_that_matches_nothing_says_so_with_the_count() -> None:
    runs = populate()
    out = CliRunner().invoke(main, ["results", "--agent", "nobody"])
    assert out.exit_code == 0, out.output
    assert f"no runs match --agent nobody ({len(runs)} runs recorded" in out.output
    assert "no runs recorded" not in out.output


def test_no_runs_at_all_says_what_to_run() -> None:
    out = CliRunner().invoke(main, ["results", "--scenario", "x"])
    assert out.exit_code == 0 and "no runs recorded (see `opsbench run`)" in out.output


@pytest.mark.parametrize("command", [["results"], ["leaderboard"]])
def test_csv_into_missing_folders_makes_them(tmp_path: Path, command: list[str]) -> None:
    populate()
    target = tmp_path / "a" / "b" / "rows.csv"
    out = CliRunner().invoke(main, [*command, "--csv", str(target)])
    assert out.exit_code == 0, out.output
    assert target.read_text().splitlines()[0].startswith(("agent", "scenario", "label", "rank"))


@pytest.mark.parametrize("command", [["results", "--csv"], ["leaderboard", "--csv"], ["report", "--out"]])
def test_an_output_path_that_cannot_be_written_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = CliRunner().invoke(main, [*command, str(blocker / "inside" / "x.out")])
    assert out.exit_code == 2, out.output
    assert command[1] in out.output and str(blocker) in out.output and "Traceback" not in out.output


SCENARIO = Path(__file__).resolve().parents[2] / "scenario_specs" / "loopweb-web-down"


def test_score_warns_on_fields_it_does_not_score(tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    output.write_text('{"entities": [{"id": "x", "rootCause": true}], "rootCause": "x"}')
    out = CliRunner().invoke(main, ["score", "--ground-truth", str(SCENARIO / "ground_truth.yaml"),
                                    "--output", str(output)])
    assert out.exit_code == 0, out.output
    assert "warning: unknown field 'rootCause'" in out.output
    assert "unknown field 'entities[0].rootCause'" in out.output


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b"[" * 5000 + b"]" * 5000, b"just: [a, list",
                                     b"- not\n- a topology\n"])
def test_score_with_a_bad_topology_file_names_it(tmp_path: Path, content: bytes) -> None:
    topology = tmp_path / "topo.yml"
    topology.write_bytes(content)
    output = tmp_path / "out.json"
    output.write_text("{}")
    out = CliRunner().invoke(main, ["score", "--ground-truth", str(SCENARIO / "ground_truth.yaml"),
                                    "--output", str(output), "--topology", str(topology)])
    assert out.exit_code == 2, out.output
    assert "--topology" in out.output and str(topology) in out.output and "Traceback" not in out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
