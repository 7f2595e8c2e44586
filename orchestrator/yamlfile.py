"""Reading a YAML file so that a mistake in it is reported as a problem naming the file and line, not a traceback.

Its own module because specs, role argument specs and the validator all read YAML and none of them should have to
import another for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import FileUnreadable, Problem


def read_yaml(path: Path) -> Any:
    """Parse one YAML file; a file that cannot be read, is not UTF-8, is malformed or is nested thousands deep
    becomes a `FileUnreadable` (a SpecInvalid) naming the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileUnreadable(Problem(str(path), "$", f"cannot read the file: {exc.strerror}")) from exc
    except UnicodeDecodeError as exc:
        raise FileUnreadable(Problem(str(path), f"byte {exc.start}", "not UTF-8 text: save the file as UTF-8")) from exc
    try:
        return yaml.safe_load(text)
    except RecursionError as exc:
        raise FileUnreadable(Problem(str(path), "$", "nested too deeply to read (thousands of levels): not a file "
                                                     "OpsBench wrote or expects")) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "$"
        problem = getattr(exc, "problem", None) or str(exc)
        raise FileUnreadable(Problem(str(path), where, f"malformed YAML: {problem}")) from exc
