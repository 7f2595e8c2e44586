"""Bearer-token authentication for the whole gateway (REST, OpenAPI document and MCP), as one ASGI middleware.

The expected token is read from the run's token file on every request, so revoking access (the lifecycle deletes
`secrets/agent_token`) takes effect at once, without restarting the gateway. Refusals are logged with the client
address and path; the token itself never is.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Collection

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("opsbench.gateway")

OPEN_PATHS = frozenset({"/v1/health"})


class BearerAuth:
    """Let a request through only with `Authorization: Bearer <token>`; answer 401 otherwise."""

    def __init__(self, app: ASGIApp, token: Callable[[], str | None], open_paths: Collection[str] = OPEN_PATHS
                 ) -> None:
        self.app = app
        self.token = token
        self.open_paths = frozenset(open_paths)

    def _refusal(self, scope: Scope) -> str | None:
        expected = self.token()
        if expected is None:
            return "no agent token is in force (not issued yet, or revoked)"
        header = Headers(scope=scope).get("authorization")
        if not header:
            return "missing Authorization header"
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return "Authorization is not a bearer token"
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            return "wrong token"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        reason = self._refusal(scope)
        if reason is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        log.warning("refused %s %s from %s: %s", scope.get("method"), scope["path"], client[0], reason)
        body = json.dumps({"ok": False, "error": {"code": "unauthorized", "message": reason}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="opsbench-gateway"')]})
        await send({"type": "http.response.body", "body": body})
