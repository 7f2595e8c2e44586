"""Reading a JSON (or JSON Lines) file so that a mistake in it is one problem naming the file, never a traceback.

The JSON counterpart of `orchestrator.yamlfile`: a file that cannot be read, is not UTF-8, is malformed or is nested
deeper than any file OpsBench writes or expects (`MAX_DEPTH`; Python's parser would raise RecursionError some
thousand levels down) becomes a `FileUnreadable` naming the file, the line and what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.errors import FileUnreadable, Problem

MAX_DEPTH = 200
"""Deepest nesting of arrays and objects accepted. Specs, outputs, trajectories and indexes nest a dozen deep."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of `[` and `{` in JSON `text` (brackets inside strings not counted), without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def read_text(path: Path) -> str:
    """The file's UTF-8 text; FileUnreadable when it cannot be read or is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FileUnreadable(Problem(str(path), f"byte {exc.start}", "not UTF-8 text: save the file as UTF-8")) \
            from None
    except OSError as exc:
        raise FileUnreadable(Problem(str(path), "$", f"cannot read the file: {exc.strerror}")) from None


def parse_json(text: str, file: str, where: str = "") -> Any:
    """`text` parsed as one JSON document of `file` (`where` prefixes the location, e.g. a line of a JSONL file)."""
    if nesting_depth(text) > MAX_DEPTH:
        raise FileUnreadable(Problem(file, where or "$", f"nested more than {MAX_DEPTH} levels deep: not a file "
                                                         "OpsBench wrote or expects"))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if not where else f"{where}, column {exc.colno}"
        raise FileUnreadable(Problem(file, at, f"malformed JSON: {exc.msg}")) from None
    except RecursionError:  # the depth check makes this unreachable; kept so no input can ever give a traceback
        raise FileUnreadable(Problem(file, where or "$", "nested too deeply to read")) from None


def read_json(path: Path) -> Any:
    """Parse one JSON file; FileUnreadable naming the file and line for anything that is not a JSON document."""
    return parse_json(read_text(path), str(path))


def read_jsonl(path: Path) -> list[Any]:
    """Parse a JSON Lines file (blank lines skipped); FileUnreadable naming the file and the bad line."""
    text = read_text(path)
    return [parse_json(line, str(path), f"line {number}")
            for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def refuse_deep(path: Path, *, lines: bool = False) -> None:
    """FileUnreadable when the JSON (each line with `lines`) in `path` nests deeper than MAX_DEPTH; nothing for a
    file that is missing, unreadable or not UTF-8, which its reader judges (an agent's output then scores as
    malformed or missing). For readers that parse such files themselves."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for number, line in enumerate(text.splitlines() if lines else [text], start=1):
        if nesting_depth(line) > MAX_DEPTH:
            raise FileUnreadable(Problem(str(path), f"line {number}" if lines else "$",
                                         f"nested more than {MAX_DEPTH} levels deep: not a file OpsBench wrote "
                                         "or expects"))
