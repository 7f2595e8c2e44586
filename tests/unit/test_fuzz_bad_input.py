"""Property tests: every file-reading command answers random bytes, deep nesting and wrong encodings with one error
(exit 2, or the command's documented code), never a traceback, naming the path given; every state-reading command
answers a garbage run index the same way.

Seeded (the ``ci`` profile derandomizes) and small: OPSBENCH_FUZZ_BAD_INPUT_CASES sets the cases per command.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from fuzzing import cases
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator import paths
from orchestrator.cli import main

CASES = cases("OPSBENCH_FUZZ_BAD_INPUT_CASES", 3)
GROUND_TRUTH = next(paths.SPECS_DIR.glob("*/ground_truth.yaml"))
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


def _deep(depth: int, flavour: str) -> bytes:
    if flavour == "array":
        return ("[" * depth + "]" * depth).encode()
    if flavour == "object":
        return ('{"a": ' * depth + "1" + "}" * depth).encode()
    return "".join(f"{'  ' * i}- \n" for i in range(depth)).encode()  # YAML block sequences


BAD_CONTENT = st.one_of(
    st.binary(min_size=1, max_size=400),
    st.builds(_deep, st.integers(1000, 1500), st.sampled_from(["array", "object"])),
    st.builds(lambda text, codec: ("name: é " + text).encode(codec, errors="replace"), TEXT,
              st.sampled_from(["latin-1", "utf-16", "cp1252"])),
)
"""Random bytes; JSON or YAML nested thousands deep; text in an encoding that is not UTF-8."""
EVERY_KIND = (_deep(1500, "array"), _deep(1500, "object"), _deep(520, "yaml"), "name: café\n".encode("latin-1"),
              "name: café\n".encode("utf-16"), b"\x00\xff\xfe garbage \x80")
"""One of each kind, run first in every profile (a derandomized handful of draws may miss a kind)."""


def with_every_kind(test: Callable[[bytes], None]) -> Callable[[bytes], None]:
    for content in EVERY_KIND:
        test = example(content)(test)
    return test


@dataclass(frozen=True)
class Case:
    """A command reading `file` (placed as `name` in a fresh folder), the exit codes it may give, and whether an
    error must name the path."""

    args: Callable[[Path], list[str]]
    name: str = "input.yaml"
    codes: tuple[int, ...] = (2,)
    names_path: bool = True


FILE_COMMANDS: dict[str, Case] = {
    "validate": Case(lambda f: ["validate", str(f)], "scenario.yaml", codes=(1,)),  # 1: problems found
    "score --ground-truth": Case(lambda f: ["score", "--ground-truth", str(f), "--output", str(f.parent / "o")]),
    # an agent's output or trajectory that is no JSON is scored (status malformed, exit 0); too deep is refused
    "score --output": Case(lambda f: ["score", "--ground-truth", str(GROUND_TRUTH), "--output", str(f)],
                           "output.json", codes=(0, 2)),
    "score --trajectory": Case(lambda f: ["score", "--ground-truth", str(GROUND_TRUTH), "--output",
                                          str(f.parent / "o"), "--trajectory", str(f)], "trajectory.jsonl",
                               codes=(0, 2)),
    "score --topology": Case(lambda f: ["score", "--ground-truth", str(GROUND_TRUTH), "--output",
                                        str(f.parent / "o"), "--topology", str(f)], "topology.yml"),
    "campaign --file": Case(lambda f: ["campaign", "--file", str(f), "--json"], "campaign.yaml"),
    "run": Case(lambda f: ["run", str(f)], "scenario.yaml"),
    "snapshot verify": Case(lambda f: ["snapshot", "verify", "--no-replay", str(f)], "s.tar.gz"),
    "snapshot verify --json": Case(lambda f: ["snapshot", "verify", "--no-replay", "--json", str(f)], "s.tar.xz"),
    "snapshot import": Case(lambda f: ["snapshot", "import", str(f), "--into", str(f.parent / "corpus")],
                            "s.tar.gz"),
    "snapshot export": Case(lambda f: ["snapshot", "export", str(f.parent), "--out", str(f.parent / "x.tar.gz")],
                            "snapshot.json"),
    "snapshot list": Case(lambda f: ["snapshot", "list", str(f.parent)], "s.tar.gz", codes=(0,), names_path=False),
    "replay": Case(lambda f: ["replay", str(f)], "s.tar.gz"),
}


@pytest.mark.parametrize("command", list(FILE_COMMANDS))
def test_a_file_reading_command_gives_one_error_for_bad_bytes(command: str) -> None:
    case = FILE_COMMANDS[command]

    @settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @with_every_kind
    @given(content=BAD_CONTENT)
    def check(content: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="opsbench-bad-") as tmp:
            folder = Path(tmp) / "in"
            folder.mkdir()
            file = folder / case.name
            file.write_bytes(content)
            got = CliRunner().invoke(main, case.args(file), env={"OPSBENCH_HOME": str(Path(tmp) / "home")})
            assert got.exit_code in case.codes, (command, got.output[-600:], got.exception)
            assert isinstance(got.exception, SystemExit | None), (command, repr(got.exception))
            assert "Traceback" not in got.output
            if case.names_path and got.exit_code:
                named = str(folder) if command == "snapshot export" else str(file)
                assert named in got.output, (command, got.output[-600:])

    check()


STATE_COMMANDS = (["runs"], ["runs", "--json"], ["show", "x"], ["cleanup", "--json"], ["results"],
                  ["leaderboard", "--json"], ["report", "--out", "{home}/r.html"])
GARBAGE_DB = st.binary(min_size=100, max_size=4000).filter(lambda b: not b.startswith(b"SQLite format 3"))


@pytest.mark.parametrize("command", STATE_COMMANDS, ids=" ".join)
def test_a_state_reading_command_gives_one_error_for_a_garbage_index(command: list[str]) -> None:
    @settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(garbage=GARBAGE_DB)
    def check(garbage: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="opsbench-state-") as home:
            db = Path(home) / "opsbench.db"
            db.write_bytes(garbage)
            args = [a.replace("{home}", home) for a in command]
            got = CliRunner().invoke(main, args, env={"OPSBENCH_HOME": home})
            assert got.exit_code == 2, (command, got.output[-600:], got.exception)
            assert isinstance(got.exception, SystemExit), repr(got.exception)
            assert str(db) in got.output

    check()
