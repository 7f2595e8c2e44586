"""The per-run tool gateway: alerts, metrics, logs, traces, topology and scoped control over REST and MCP.

    ctx = load_context(run_dir, GatewayOptions(profile="full", max_calls=200, deadline=...))
    gateway = Gateway(ctx)                 # profile, budgets, trajectory
    app = create_app(gateway)              # FastAPI: /v1/..., /openapi.json, /mcp
    python -m orchestrator.gateway --run-dir DIR --port 0

Modules: `tools/` (the tools, one module per evidence family, and `tools/registry.py`, the one registry), `evidence/`
(where tools read the world: the live environment or a frozen snapshot), `dispatch`
(checks and trajectory), `rest` / `mcp_server` (transports), `auth`, `scope`, `control` (the backends the control
tools act through), `workspace` (the workspace container the terminal tools act in), `context`, `paging`, `times`,
`httpjson`, `trajectory`, `errors`.
See docs/gateway.md.
"""

from .context import GatewayOptions, RunContext, load_context
from .control import ControlBackend, FakeControl, PodmanControl
from .dispatch import Gateway, Outcome
from .errors import ToolError
from .tools import PROFILES, TOOLS, Tool, ToolResult, profile_tools

__all__ = [
    "PROFILES",
    "TOOLS",
    "ControlBackend",
    "FakeControl",
    "Gateway",
    "GatewayOptions",
    "Outcome",
    "PodmanControl",
    "RunContext",
    "Tool",
    "ToolError",
    "ToolResult",
    "load_context",
    "profile_tools",
]
