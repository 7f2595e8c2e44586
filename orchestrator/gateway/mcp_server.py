"""The same tools as an MCP server (Streamable HTTP transport), mounted in the gateway's ASGI app at /mcp.

Built on the SDK's low-level `Server` rather than `MCPServer`: the tools already have JSON schemas and a dispatch
function, and the low-level server hands both over unchanged. `tools/list` lists the profile's tools; `tools/call`
goes through `Gateway.call`, so budgets, scope and the trajectory are the ones REST uses. A refused or failed call
is a tool result with `isError: true` and the same `{ok, error: {code, message}}` body as REST, so the model sees
why.

Stateless, JSON-response mode: each POST is answered on its own, no session or server-to-client stream is kept
(the tools never need to call back).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from .dispatch import Gateway

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def image_of(body: dict[str, Any]) -> types.ImageContent | None:
    """An answer whose result is an image (`mime_type` image/*, base64 `data`) as MCP image content; the body keeps
    everything but the data (so the model gets the picture once)."""
    result = body.get("result") if body.get("ok") else None
    if not isinstance(result, dict) or not str(result.get("mime_type", "")).startswith("image/"):
        return None
    result = dict(result)
    data = result.pop("data", None)
    if not isinstance(data, str):
        return None
    body["result"] = result
    return types.ImageContent(data=data, mime_type=str(result["mime_type"]))


def build_server(gateway: Gateway) -> Server[Any]:
    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema()) for t in gateway.tools
        ])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        outcome = await anyio.to_thread.run_sync(gateway.call, params.name, params.arguments, "mcp")
        body = outcome.body()
        image = image_of(body)
        text = json.dumps(body, default=str)
        if image is None:
            return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=json.loads(text),
                                        is_error=not outcome.ok)
        # An image answer (view_screenshot): the picture as MCP image content, its description beside it as text.
        return types.CallToolResult(content=[image, types.TextContent(text=text)], structured_content=json.loads(text),
                                    is_error=False)

    return Server(
        "opsbench-gateway",
        version="1",
        instructions="Tools to investigate and mitigate an incident in one OpsBench run: alerts, metrics, logs, "
                     "traces, topology and scoped control actions; in a DevOps run, a shell and file tools in its "
                     "workspace. Long lists are paged: pass `next_page` back as `page` with the same other "
                     "arguments.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def build_mcp_app(gateway: Gateway, host: str = "127.0.0.1") -> tuple[StreamableHTTPASGIApp,
                                                                         StreamableHTTPSessionManager]:
    """The ASGI endpoint and its session manager; the caller runs `manager.run()` for the app's lifetime.

    On a loopback bind, Host/Origin checks (DNS rebinding protection) stay on; on any other bind the bearer token
    is the only gate, as for REST. A contained command agent reaches the host's loopback as 10.0.2.2 (slirp4netns,
    orchestrator/sandbox/network.py), an address literal no rebinding name resolves to in a browser's stead.
    """
    if host in LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "10.0.2.2:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", "http://10.0.2.2:*"],
        )
    else:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    manager = StreamableHTTPSessionManager(app=build_server(gateway), json_response=True, stateless=True,
                                           security_settings=security)
    return StreamableHTTPASGIApp(manager), manager
