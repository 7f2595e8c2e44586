"""Error types that carry where a problem is, so every message names file, field and problem."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One validation finding: which file, which JSON path inside it, what is wrong."""

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.message}"


class OpsBenchError(Exception):
    """An error meant for the user: printed as-is, without a traceback."""


class SpecInvalid(OpsBenchError):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"scenario spec is invalid ({len(problems)} problem(s)):\n{lines}")
