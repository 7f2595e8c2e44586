"""The trajectory: one JSON line per tool call, whatever its outcome, in `<run dir>/gateway/trajectory.jsonl`.

Records follow `orchestrator/schemas/trajectory_record.schema.json`; the process metrics read them. Arguments are
stored as the agent sent them, minus anything token-like (by key name, by value equal to the run's token, or a
`Bearer ...` string), and long strings are shortened with a marker saying how much was cut.

The answers of successful calls go beside it, once per distinct answer, in `<run dir>/gateway/answers.jsonl`
(`{"sha256", "answer"}`, the record's `result_sha256`; at most 64 KiB each): the trajectory stays small for the
process metrics, and an export (ATIF, `orchestrator/atif.py`) can still show what each call answered.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

REDACTED = "[redacted]"
MAX_STRING = 2000
_SECRET_KEY = re.compile(r"(?i)token|secret|passw|authorization|api[_-]?key|credential|cookie")
_BEARER = re.compile(r"(?i)\bbearer\s+\S+")


def redact(value: Any, token: str | None = None, key: str | None = None) -> Any:
    """A copy of `value` safe to store (see module docstring)."""
    if key is not None and _SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, dict):
        return {str(k): redact(v, token, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, token) for v in value]
    if isinstance(value, str):
        if token and token in value:
            value = value.replace(token, REDACTED)
        value = _BEARER.sub(f"Bearer {REDACTED}", value)
        if len(value) > MAX_STRING:
            value = value[:MAX_STRING] + f"...[{len(value) - MAX_STRING} more characters not recorded]"
        return value
    return value


class TrajectoryLog:
    """Appends records to the trajectory file; safe to call from many threads (one lock, one write per line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)


MAX_ANSWER = 64 * 1024


class AnswerLog:
    """The answers of a run's calls, each distinct one once (by its SHA-256, the trajectory's ``result_sha256``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def keep(self, sha256: str, answer: str, token: str | None = None) -> None:
        with self._lock:
            if sha256 in self._seen:
                return
            self._seen.add(sha256)
            if token:
                answer = answer.replace(token, REDACTED)
            entry: dict[str, Any] = {"sha256": sha256, "answer": answer[:MAX_ANSWER]}
            if len(answer) > MAX_ANSWER:
                entry["cut"] = len(answer) - MAX_ANSWER
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
