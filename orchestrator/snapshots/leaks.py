"""The proof that a snapshot holds no ground truth: search every file of a snapshot for given strings.

A snapshot is handed to anyone; the ground truth must never travel with it. `find_strings` looks for each string in
every file's bytes (case-insensitively, so `fault_container_stop` is found as `FAULT_CONTAINER_STOP` too), and
`fault_strings` names what of a scenario must never appear: its fault roles and its fault items' names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.spec import Scenario


@dataclass(frozen=True)
class Leak:
    file: str
    string: str

    def __str__(self) -> str:
        return f"{self.file}: contains {self.string!r}"


def find_strings(snapshot_dir: Path, strings: Iterable[str]) -> list[Leak]:
    """Every (file, string) where a file under `snapshot_dir` contains one of `strings` (empty strings ignored)."""
    needles = sorted({s for s in strings if s})
    root = Path(snapshot_dir)
    leaks: list[Leak] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes().lower()
        for needle in needles:
            if needle.lower().encode() in data:
                leaks.append(Leak(path.relative_to(root).as_posix(), needle))
    return leaks


def fault_strings(scenario: Scenario) -> list[str]:
    """The scenario's fault role names and fault item names: never part of what an agent may see."""
    found: list[str] = []
    for fault in scenario.faults:
        found.append(str(fault["role"]))
        if fault.get("name"):
            found.append(str(fault["name"]))
    return found
