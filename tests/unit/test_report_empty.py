"""A report with no runs says what to run: the commands (checked against the real CLI, so they cannot go stale),
not a page of empty charts."""

from __future__ import annotations

import html as html_lib
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from synthetic_runs import populate_harness

from orchestrator import report
from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)


def _text(page: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_empty_report_says_what_to_run() -> None:
    page = report.render([])
    text = _text(page)
    assert re.findall(r'<section id="([a-z-]+)"', page) == ["no-runs"]
    assert "No runs to report yet" in text
    for command in ("opsbench run <scenario>", "opsbench campaign <scenario>...", "opsbench list",
                    "opsbench replay <snapshot>...", "opsbench report", "opsbench run shop-cart-down", "opsbench runs"):
        assert command in text, command
    assert "<svg" not in page and "<table" not in page and "<nav" not in page
    assert "harness run" not in text


def test_the_empty_report_names_left_out_harness_runs() -> None:
    text = _text(report.render([], harness_left_out=3))
    assert "3 harness run(s)" in text and "opsbench report --include-harness" in text


def _command(args: list[str]) -> click.Command:
    ctx = click.Context(main)
    command: click.Command = main
    for word in args:
        if not isinstance(command, click.Group) or word.startswith("<") or word.startswith("-"):
            break
        found = command.get_command(ctx, word)
        assert found is not None, f"`opsbench {' '.join(args)}`: no command {word!r}"
        command = found
    return command


@pytest.mark.parametrize("line", [c for c, _ in report.EMPTY_COMMANDS])
def test_the_suggested_commands_exist(line: str) -> None:
    words = shlex.split(line)
    assert words[0] == "opsbench"
    command = _command(words[1:])
    options = {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}
    rest = words[1 + len((command.name or "").split()):]
    positionals = []
    while rest:
        word = rest.pop(0)
        if word.startswith("--"):
            assert word in options, f"{line}: {command.name} has no {word}"
            if not options[word].is_flag:
                rest.pop(0)  # its value
        else:
            positionals.append(word)
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    assert len(positionals) <= sum(1 if a.nargs == 1 else len(positionals) for a in arguments), line
    assert all(a.nargs == -1 for a in arguments if a.nargs != 1), line


def test_the_example_scenario_exists() -> None:
    from orchestrator import paths

    example = re.search(r"opsbench run ([a-z0-9-]+)</code>", report.render([]))
    assert example and (paths.SPECS_DIR / example.group(1) / "scenario.yaml").is_file()


def test_opsbench_report_with_nothing_recorded(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "opsbench run <scenario>" in _text(out.read_text())


def test_only_harness_runs_is_an_empty_report_that_says_so(tmp_path: Path) -> None:
    populate_harness()
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = _text(out.read_text())
    assert "No runs to report yet" in text and "12 harness run(s)" in text


def test_a_selection_that_matches_nothing_is_named() -> None:
    text = _text(report.render([], filters=["--agent nobody", "--since 2100-01-01"]))
    assert "No recorded run matches --agent nobody --since 2100-01-01" in text
    assert "opsbench runs" in text and "opsbench run <scenario>" in text  # and what to run, still
    assert "If you gave" not in text
