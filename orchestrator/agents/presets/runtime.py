"""What a preset's CLI module is given and gives back, shared by ``run.py`` and the per-CLI modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
