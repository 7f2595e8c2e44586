"""The gateway's ASGI app: REST under /v1, the OpenAPI document, and the MCP endpoint at /mcp, behind one bearer auth.

    GET  /v1/health          no auth; {"ok": true}
    GET  /v1/tools           the profile's tools: name, description, category, family, input_schema; the budget
    POST /v1/tools/{name}    JSON body = arguments -> 200 {"ok": true, "result", "next_page"}
                             or 4xx/5xx {"ok": false, "error": {"code", "message"[, "field"]}}
    GET  /openapi.json       generated from the same tool definitions (one operation per tool of the profile)
    POST /mcp                MCP, Streamable HTTP (see mcp_server.py)

Per-tool routes exist for the profile's tools only, so the OpenAPI document lists exactly what the run offers; a
catch-all route sends any other name through the same dispatch, which answers `denied` (a known tool outside the
profile) or `not_found` and records the attempt. The body is decoded here and not by FastAPI, so a malformed body
is also answered in the gateway's error format and recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel
from starlette.routing import Route

from .auth import BearerAuth
from .dispatch import Gateway, Outcome
from .errors import HTTP_STATUS, ToolError
from .mcp_server import build_mcp_app
from .tools import Tool


class ToolAnswer(BaseModel):
    ok: bool
    result: Any = None
    next_page: str | None = None


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorAnswer(BaseModel):
    ok: bool = False
    error: ErrorDetail


_bearer = HTTPBearer(auto_error=False, description="The run's agent token (the manifest's token_file).")
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorAnswer, "description": ", ".join(c for c, s in HTTP_STATUS.items() if s == status)}
    for status in sorted(set(HTTP_STATUS.values()))
}
_ERRORS[401] = {"model": ErrorAnswer, "description": "missing or wrong bearer token"}


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(body, default=str), status_code=status, media_type="application/json")


async def _call(gateway: Gateway, name: str, request: Request) -> Response:
    raw = await request.body()
    args: Any = None
    body_error: ToolError | None = None
    if raw.strip():
        try:
            args = json.loads(raw)
        except ValueError as exc:
            body_error = ToolError("invalid", f"body: not JSON ({exc})", field="body")
            args = {"_body": raw.decode(errors="replace")}
    outcome: Outcome = await anyio.to_thread.run_sync(gateway.call, name, args, "rest", body_error)
    return _json(outcome.body(), outcome.http_status)


def _add_tool_route(app: FastAPI, gateway: Gateway, tool: Tool[Any]) -> None:
    async def endpoint(request: Request) -> Response:
        return await _call(gateway, tool.name, request)

    app.add_api_route(
        f"/v1/tools/{tool.name}", endpoint, methods=["POST"], operation_id=tool.name, summary=tool.name,
        description=tool.description, tags=[tool.category], response_model=ToolAnswer, responses=_ERRORS,
        dependencies=[Depends(_bearer)],
        openapi_extra={"requestBody": {"required": False, "content": {"application/json": {
            "schema": tool.input_schema()}}}},
    )


def create_app(gateway: Gateway, host: str = "127.0.0.1") -> FastAPI:
    """The gateway's whole ASGI app for one run (REST, OpenAPI, MCP), wrapped in bearer auth."""
    mcp_endpoint, mcp_manager = build_mcp_app(gateway, host)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with mcp_manager.run():
            yield

    app = FastAPI(title="OpsBench tool gateway", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description=f"Tools of run {gateway.ctx.run_id} (profile {gateway.ctx.options.profile}). "
                              "Every call needs `Authorization: Bearer <token>`.")

    @app.get("/v1/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        return {"ok": True}

    @app.get("/v1/tools", tags=["meta"], dependencies=[Depends(_bearer)])
    async def list_tools() -> dict[str, Any]:
        return {
            "ok": True,
            "profile": gateway.ctx.options.profile,
            "budget": gateway.budget(),
            "tools": [{"name": t.name, "description": t.description, "category": t.category, "family": t.family,
                       "input_schema": t.input_schema()} for t in gateway.tools],
        }

    for tool in gateway.tools:
        _add_tool_route(app, gateway, tool)

    @app.post("/v1/tools/{name}", include_in_schema=False)
    async def other_tool(name: str, request: Request) -> Response:
        return await _call(gateway, name, request)

    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint))
    app.add_middleware(BearerAuth, token=gateway.ctx.current_token)
    return app
