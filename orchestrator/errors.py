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
    def __init__(self, problems: list[Problem], intro: str = "scenario spec is invalid") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{intro} ({len(problems)} problem(s)):\n{lines}")


class FileUnreadable(SpecInvalid):
    """A file that cannot be read as the text it should be: not UTF-8, malformed, nested too deeply, not readable.

    Still a `SpecInvalid` (one `Problem`), so the spec and ground-truth readers collect it like any other problem;
    its message is the problem alone (file, where, what, what to do), since the file need not be a spec."""

    def __init__(self, problem: Problem) -> None:
        self.problems = [problem]
        OpsBenchError.__init__(self, str(problem))
