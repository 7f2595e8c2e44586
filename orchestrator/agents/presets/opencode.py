"""OpenCode (``opencode-ai``) headless: ``opencode run --format json PROMPT`` with its own ``opencode.json``.

- MCP: ``mcp.opsbench`` (``type: remote``, the gateway's URL, ``Authorization: Bearer {env:OPSBENCH_MCP_TOKEN}``:
  OpenCode substitutes the variable, so the token is in no file) in a config file in the private HOME named by
  ``OPENCODE_CONFIG``; a project's own ``opencode.json`` is ignored (``OPENCODE_DISABLE_PROJECT_CONFIG``);
- model: a provider of its own (``provider.opsbench``: the bundled ``@ai-sdk/openai-compatible``, i.e. OpenAI Chat
  Completions, ``baseURL`` the proxy, ``apiKey`` ``{env:OPENAI_API_KEY}`` = the run's proxy token) and
  ``-m opsbench/MODEL``; its background calls (session titles) use the same model (``small_model``), so every call
  is priced;
- tools: its own (bash, edit, read ...) allowed without asking (``permission``: our sandbox is the boundary), web
  fetches refused; the models.dev catalogue fetch, default plugins, LSP downloads, sharing and updates off (each
  would reach the internet);
- transcript: ``--format json`` events into ``cli.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.agents.presets.prompt import MCP_SERVER
from orchestrator.agents.presets.runtime import Context, Launch, stream_events

PROVIDER = "opsbench"


def config(ctx: Context) -> dict[str, Any]:
    model = f"{PROVIDER}/{ctx.model}"
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "OpsBench model proxy",
                                "options": {"baseURL": ctx.base_url, "apiKey": "{env:OPENAI_API_KEY}"},
                                "models": {ctx.model: {"name": ctx.model}}}},
        "model": model,
        "small_model": model,
        "mcp": {MCP_SERVER: {"type": "remote", "url": ctx.mcp_url, "enabled": True, "timeout": 120000,
                             "headers": {"Authorization": "Bearer {env:OPSBENCH_MCP_TOKEN}"}}},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "allow"},
        "autoupdate": False,
        "share": "disabled",
    }


def launch(ctx: Context) -> Launch:
    file = ctx.home / ".opsbench" / "opencode.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(config(ctx), indent=2))
    argv = [str(ctx.binary), "run", "--format", "json", "-m", f"{PROVIDER}/{ctx.model}", ctx.prompt]
    env = {"OPENCODE_CONFIG": str(file), "OPSBENCH_MCP_TOKEN": ctx.token, "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
           "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
           "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
           "OPENCODE_DISABLE_CLAUDE_CODE": "1", "NO_COLOR": "1"}
    return Launch(argv, env)


def final_text(transcript: Path) -> str:
    """The text parts after the CLI's last tool call (its ``--format json`` events)."""
    text = ""
    for event in stream_events(transcript):
        part: dict[str, Any] = event["part"] if isinstance(event.get("part"), dict) else {}
        if event.get("type") == "tool_use":
            text = ""
        elif event.get("type") == "text" and isinstance(part.get("text"), str):
            text += part["text"]
    return text
