"""cart: shopping carts in Redis (REDIS_ADDR host:port, REDIS_PASSWORD optional).

Flag: cartServiceFailure (every cart request fails with 500).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..client import parse_addr
from ..web import App, HTTPError, Request
from .common import require_int, require_str

CART_TTL_SECONDS = 3600
USER_RE = re.compile(r"^[A-Za-z0-9._@-]{1,100}$")
T = TypeVar("T")


def build(app: App, env: Mapping[str, str]) -> None:
    host, port = parse_addr(env.get("REDIS_ADDR") or "redis:6379", 6379)
    # One immediate retry on a connection error (a pooled connection that Redis dropped), none on timeouts:
    # the same behaviour with Debian's redis-py 4.3 and with newer versions (which default to 3 retries).
    client = redis.Redis(host=host, port=port, password=env.get("REDIS_PASSWORD") or None, socket_timeout=2,
                         socket_connect_timeout=2, decode_responses=True,
                         retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
                         retry_on_error=[redis.exceptions.ConnectionError])
    flags = app.flags

    def redis_call(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            raise HTTPError(503, f"redis unavailable at {host}:{port}: {exc}") from None
        except redis.exceptions.RedisError as exc:
            raise HTTPError(500, f"redis error: {exc}") from None

    def readiness() -> tuple[bool, str]:
        try:
            redis_call(client.ping)
        except HTTPError as exc:
            return False, exc.message
        return True, "redis ok"

    app.readiness = readiness
    app.shutdown_hooks.append(client.close)

    def check(req: Request) -> tuple[str, str]:
        user = req.params["user"]
        if not USER_RE.match(user):
            raise HTTPError(400, "invalid user id")
        if flags.enabled("cartServiceFailure"):
            raise HTTPError(500, f"internal error accessing the cart of {user}")
        return user, f"cart:{user}"

    def items(key: str) -> list[dict[str, Any]]:
        raw: dict[str, str] = redis_call(lambda: client.hgetall(key))  # type: ignore[arg-type,return-value]
        return [{"product_id": pid, "quantity": int(qty)} for pid, qty in sorted(raw.items())]

    @app.route("GET", "/cart/{user}")
    def get_cart(req: Request) -> dict[str, Any]:
        user, key = check(req)
        return {"user": user, "items": items(key)}

    @app.route("POST", "/cart/{user}")
    def add_item(req: Request) -> dict[str, Any]:
        user, key = check(req)
        body = req.json()
        product_id = require_str(body, "product_id", 64)
        quantity = require_int(body, "quantity", 1, 100, default=1)

        def add() -> None:
            pipe = client.pipeline()
            pipe.hincrby(key, product_id, quantity)
            pipe.expire(key, CART_TTL_SECONDS)
            pipe.execute()

        redis_call(add)
        return {"user": user, "items": items(key)}

    @app.route("DELETE", "/cart/{user}")
    def empty_cart(req: Request) -> dict[str, Any]:
        user, key = check(req)
        redis_call(lambda: client.delete(key))
        return {"user": user, "items": []}
