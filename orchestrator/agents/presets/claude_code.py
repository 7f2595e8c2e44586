"""Claude Code (``@anthropic-ai/claude-code``) headless: ``claude -p PROMPT`` with its own MCP configuration.

- MCP: a ``--mcp-config`` file (``{"mcpServers": {"opsbench": {"type": "http", "url", "headers"}}}``) in the
  private HOME, never in the run's files (it holds the gateway's token), and ``--strict-mcp-config`` so no other
  server is loaded;
- model: ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` (the proxy and the run's proxy token), ``--model``, and the
  same model for its background calls (``ANTHROPIC_SMALL_FAST_MODEL``, ``ANTHROPIC_DEFAULT_HAIKU_MODEL``) so every
  call is priced;
- tools: the gateway's offered up front (``ENABLE_TOOL_SEARCH=false``: no deferred loading behind ToolSearch),
  its own (Bash, Read, Write ...) without permission prompts (``--dangerously-skip-permissions``: our
  sandbox is the boundary, as its documentation recommends), telemetry, update checks and error reports off;
- transcript: ``--output-format stream-json --verbose`` (one JSON event per line) into ``cli.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.agents.presets.prompt import MCP_SERVER
from orchestrator.agents.presets.runtime import Context, Launch, stream_events


def launch(ctx: Context) -> Launch:
    config = ctx.home / ".opsbench" / "claude-mcp.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {MCP_SERVER: {
        "type": "http", "url": ctx.mcp_url, "headers": {"Authorization": f"Bearer {ctx.token}"}}}}))
    config.chmod(0o600)
    argv = [str(ctx.binary), "-p", ctx.prompt, "--model", ctx.model, "--mcp-config", str(config),
            "--strict-mcp-config", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions",
            "--no-session-persistence"]
    env = {"ANTHROPIC_MODEL": ctx.model, "ANTHROPIC_SMALL_FAST_MODEL": ctx.model,
           "ANTHROPIC_DEFAULT_HAIKU_MODEL": ctx.model, "ANTHROPIC_DEFAULT_SONNET_MODEL": ctx.model,
           "ANTHROPIC_DEFAULT_OPUS_MODEL": ctx.model, "CLAUDE_CONFIG_DIR": str(ctx.home / ".claude"),
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1", "MCP_TIMEOUT": "30000",
           "ENABLE_TOOL_SEARCH": "false"}
    return Launch(argv, env)


def final_text(transcript: Path) -> str:
    """The CLI's last answer (the ``result`` event of its stream), to find an answer it printed instead."""
    text = ""
    for event in stream_events(transcript):
        if event.get("type") == "result" and isinstance(event.get("result"), str):
            text = event["result"]
    return text
