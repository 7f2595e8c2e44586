"""The one registry of tools: every family's tools in listing order, and which tools each profile offers.

REST (`rest.py`), MCP (`mcp_server.py`) and the OpenAPI document are all generated from `TOOLS`, so the three can
never disagree about what a tool takes. A new family is a module beside this one and one entry in `FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import alerts, billing, browser, changes, control, cost, logs, metrics, terminal, topology, traces
from .base import Tool

FAMILIES = (alerts, metrics, logs, traces, topology, changes, browser, control, billing, cost, terminal)
"""Family modules in the order their tools are listed (agents and the OpenAPI document see this order)."""

TOOLS: tuple[Tool[Any], ...] = tuple(t for family in FAMILIES for t in family.TOOLS)
BY_NAME: dict[str, Tool[Any]] = {t.name: t for t in TOOLS}

PROFILES: dict[str, Callable[[Tool[Any]], bool]] = {
    "full": lambda t: True,
    "no-traces": lambda t: t.family != "traces",
    "metrics-only": lambda t: t.family in ("alerts", "metrics", "topology"),
    "observe-only": lambda t: t.category == "observe",
}
"""Which tools a run offers. A tool outside the profile is not listed, and calling it is `denied`."""


def profile_tools(profile: str) -> list[Tool[Any]]:
    try:
        keep = PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown tool profile {profile!r}; profiles: {', '.join(PROFILES)}") from None
    return [t for t in TOOLS if keep(t)]
