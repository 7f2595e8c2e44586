"""Codex CLI (``@openai/codex``) headless: ``codex exec --json PROMPT`` with its own ``config.toml``.

- MCP: ``[mcp_servers.opsbench]`` (Streamable HTTP ``url``, the token read from ``OPSBENCH_MCP_TOKEN`` through
  ``bearer_token_env_var``, as Codex takes no inline token) in ``$CODEX_HOME/config.toml``, in the private HOME;
- model: a provider of its own (``[model_providers.opsbench]``: ``base_url`` the proxy, ``env_key``
  ``OPENAI_API_KEY`` = the run's proxy token, ``wire_api = "responses"``) and ``-m MODEL``;
- tools: its own shell and patch tools with ``--dangerously-bypass-approvals-and-sandbox`` (our sandbox is the
  boundary; Codex's own would need namespaces the sandbox no longer grants), ``--ephemeral``, no git check;
- transcript: ``--json`` events into ``cli.jsonl``; ``--output-last-message`` keeps its final answer.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.agents.presets.prompt import MCP_SERVER
from orchestrator.agents.presets.runtime import Context, Launch


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def launch(ctx: Context) -> Launch:
    home = ctx.home / ".codex"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"""model = {_toml(ctx.model)}
model_provider = "opsbench"
check_for_update_on_startup = false

[model_providers.opsbench]
name = "OpsBench model proxy"
base_url = {_toml(ctx.base_url)}
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[mcp_servers.{MCP_SERVER}]
url = {_toml(ctx.mcp_url)}
bearer_token_env_var = "OPSBENCH_MCP_TOKEN"
startup_timeout_sec = 30
tool_timeout_sec = 120
""")
    last = ctx.home / ".opsbench" / "codex-last-message.txt"
    last.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(ctx.binary), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
            "--dangerously-bypass-approvals-and-sandbox", "-m", ctx.model, "--output-last-message", str(last),
            ctx.prompt]
    env = {"CODEX_HOME": str(home), "OPSBENCH_MCP_TOKEN": ctx.token, "RUST_LOG": "error", "NO_COLOR": "1"}
    return Launch(argv, env, last)


def final_text(last: Path) -> str:
    return last.read_text(errors="replace") if last.is_file() else ""
