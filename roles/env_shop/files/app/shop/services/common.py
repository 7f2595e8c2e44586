"""Helpers shared by the services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import Upstream
from ..web import App, HTTPError

# Environment variable holding each peer's host:port (default "<peer>:8080").
ADDR_VARS = {
    "catalog": "CATALOG_ADDR",
    "cart": "CART_ADDR",
    "checkout": "CHECKOUT_ADDR",
    "payment": "PAYMENT_ADDR",
    "shipping": "SHIPPING_ADDR",
    "email": "EMAIL_ADDR",
    "currency": "CURRENCY_ADDR",
    "recommendation": "RECOMMENDATION_ADDR",
    "ads": "AD_ADDR",
}


def peer_addr(peer: str, env: Mapping[str, str]) -> str:
    return env.get(ADDR_VARS[peer]) or f"{peer}:8080"


def upstream(app: App, peer: str, env: Mapping[str, str], timeout: float | None = None,
             addr: str | None = None) -> Upstream:
    return Upstream(app.service, peer, addr or peer_addr(peer, env), app.tracer, timeout=timeout)


def require_str(body: Mapping[str, Any], key: str, max_len: int = 200) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise HTTPError(400, f"missing or invalid field: {key}")
    if len(value) > max_len:
        raise HTTPError(400, f"field too long: {key}")
    return value.strip()


def require_int(body: Mapping[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HTTPError(400, f"field {key} must be an integer in [{low}, {high}]")
    return value


def require_number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise HTTPError(400, f"{what} must be a number")
    try:
        number = float(value)
    except ValueError:
        raise HTTPError(400, f"{what} must be a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise HTTPError(400, f"{what} must be finite")
    return number
