"""The gateway's tools, defined once: `base` (what a tool is, shared helpers), one module per evidence family
(`alerts`, `metrics`, `logs`, `traces`, `topology`, `changes`, `browser`, `control`, `billing`, `cost`, `terminal`)
and `registry` (the listing and the profiles)."""

from .base import Tool, ToolResult
from .registry import BY_NAME, PROFILES, TOOLS, profile_tools

__all__ = ["BY_NAME", "PROFILES", "TOOLS", "Tool", "ToolResult", "profile_tools"]
