"""Gemini CLI (``@google/gemini-cli``) headless: ``gemini -p PROMPT`` with its own ``settings.json``.

- MCP: ``mcpServers.opsbench`` (Streamable HTTP ``httpUrl``, the gateway's bearer token in ``headers``, ``trust``:
  no confirmation per call) in ``$HOME/.gemini/settings.json``, the private HOME's, never the run's files;
  ``--allowed-mcp-server-names opsbench`` so no other server is loaded;
- model: ``GOOGLE_GEMINI_BASE_URL``/``GEMINI_API_KEY`` (the proxy and the run's proxy token; it sends the key as
  ``x-goog-api-key``), ``security.auth.selectedType = gemini-api-key`` (without it a base URL selects the
  "gateway" auth type, which headless mode refuses), ``-m MODEL``;
- tools: its own (shell, file tools) with ``--yolo`` (our sandbox is the boundary), ``--skip-trust`` and folder
  trust off (the workspace is new every run), telemetry, usage statistics and update checks off;
- transcript: ``--output-format stream-json`` (one JSON event per line) into ``cli.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.agents.presets.prompt import MCP_SERVER
from orchestrator.agents.presets.runtime import Context, Launch, stream_events


def settings(ctx: Context) -> dict[str, Any]:
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "mcpServers": {MCP_SERVER: {"httpUrl": ctx.mcp_url, "headers": {"Authorization": f"Bearer {ctx.token}"},
                                    "timeout": 120000, "trust": True}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }


def launch(ctx: Context) -> Launch:
    config = ctx.home / ".gemini" / "settings.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(settings(ctx), indent=2))
    config.chmod(0o600)
    argv = [str(ctx.binary), "-p", ctx.prompt, "-m", ctx.model, "--output-format", "stream-json", "--yolo",
            "--skip-trust", "--allowed-mcp-server-names", MCP_SERVER]
    env = {"GEMINI_MODEL": ctx.model, "GEMINI_CLI_HOME": str(ctx.home), "NO_COLOR": "1", "NO_BROWSER": "1"}
    return Launch(argv, env)


def final_text(transcript: Path) -> str:
    """The assistant's text after its last tool call (the stream's ``message`` events, concatenated)."""
    text = ""
    for event in stream_events(transcript):
        if event.get("type") == "tool_use":
            text = ""
        elif event.get("type") == "message" and event.get("role") == "assistant" \
                and isinstance(event.get("content"), str):
            text += event["content"]
    return text
