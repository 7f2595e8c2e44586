"""What every baseline agent shares to reach the run's tool gateway: the call interface, its error, the REST client.

An agent is written against ``call(tool, **args) -> result`` raising ``ToolError``; the REST client here and the
MCP client (``mcp_client``) both implement it, so agents switch transport without change.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

Call = Callable[..., Any]


class ToolError(RuntimeError):
    """A tool call the gateway refused or could not answer (its message names the tool)."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"{tool}: {message}")


class GatewayClient:
    """The run's tool gateway over REST: ``POST {url}/v1/tools/{name}`` with a bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/"), token
        self.next_page: str | None = None  # of the last call: pass as ``page`` for the next one

    def __call__(self, tool: str, **args: Any) -> Any:
        req = urllib.request.Request(
            f"{self.url}/v1/tools/{tool}", data=json.dumps(args).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if not body.get("ok"):
            raise ToolError(tool, (body.get("error") or {}).get("message", "no reason given"))
        self.next_page = body.get("next_page")
        return body.get("result")
