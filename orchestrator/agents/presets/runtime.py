"""What a preset's CLI module is given and gives back, shared by ``run.py`` and the per-CLI modules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Context:
    """Everything a CLI needs to start: its binary, the model and the proxy's base URL, the gateway's MCP URL and
    token, the prompt, and the private HOME its configuration goes in."""

    binary: Path
    model: str
    base_url: str
    mcp_url: str
    token: str
    prompt: str
    home: Path
    workspace: Path


@dataclass(frozen=True)
class Launch:
    """The CLI's argv and environment additions; ``last``: a file where it leaves its final message, if any."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    last: Path | None = None


def stream_events(transcript: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a CLI's event stream (one per line), skipping what is not one; none without a file."""
    for line in transcript.read_text(errors="replace").splitlines() if transcript.is_file() else []:
        try:
            event: Any = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event
