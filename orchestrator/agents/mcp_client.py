"""The run's tool gateway over MCP, behind the same synchronous call interface as the REST client.

Agents written as plain functions (``call(tool, **args) -> result``, raising ``ToolError``) can
switch transport without change: this client keeps one MCP session (the ``mcp`` SDK's
Streamable HTTP client, bearer token in the HTTP headers) open on an event loop in a
background thread and forwards each call to it.

    with MCPGatewayClient(manifest["tools"]["mcp_url"], token) as call:
        alerts = call("get_alerts")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import TracebackType
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator.agents.gateway_client import ToolError

CALL_TIMEOUT_S = 120.0


class MCPGatewayClient:
    """A synchronous facade over one MCP client session (see module docstring).

    The session lives in one task on the background loop (anyio's cancel scopes must be entered
    and left by the same task); calls reach it through a queue.
    """

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.next_page: str | None = None
        self.tools: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._queue: asyncio.Queue[tuple[str, dict[str, Any], concurrent.futures.Future[Any]] | None] | None = None
        self._session: concurrent.futures.Future[None] | None = None

    def __enter__(self) -> MCPGatewayClient:
        self._thread.start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._session = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            ready.result(CALL_TIMEOUT_S)
        except BaseException:
            self._stop_loop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self._queue is not None and self._session is not None and not self._session.done():
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
                self._session.result(30)
        finally:
            self._stop_loop()

    def __call__(self, tool: str, **args: Any) -> Any:
        if self._queue is None or self._session is None or self._session.done():
            raise ToolError(tool, "the MCP session is closed")
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (tool, args, done))
        result = done.result(CALL_TIMEOUT_S + 10)
        body = result.structured_content or {}
        if result.is_error or not body.get("ok"):
            message = (body.get("error") or {}).get("message") or _text(result) or "no reason given"
            raise ToolError(tool, message)
        self.next_page = body.get("next_page")
        return body.get("result")

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        queue: asyncio.Queue[tuple[str, dict[str, Any], concurrent.futures.Future[Any]] | None] = asyncio.Queue()
        try:
            async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                           timeout=CALL_TIMEOUT_S) as http,
                        Client(streamable_http_client(self.url, http_client=http)) as client):
                self.tools = [t.name for t in (await client.list_tools()).tools]
                self._queue = queue
                ready.set_result(None)
                while (item := await queue.get()) is not None:
                    tool, args, done = item
                    try:
                        done.set_result(await client.call_tool(tool, args))
                    except Exception as exc:  # handed to the caller's thread
                        done.set_exception(exc)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in (result.content or []))[:500]
