"""shipping: POST /quote {address, items} -> cost in USD; POST /ship {address, items} -> tracking id."""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from typing import Any

from ..web import App, HTTPError, Request

BASE_COST_USD = 5.99
PER_ITEM_USD = 1.00


def item_count(body: Mapping[str, Any]) -> int:
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise HTTPError(400, "items must be a non-empty list")
    count = 0
    for item in items:
        qty = item.get("quantity", 1) if isinstance(item, Mapping) else None
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 1:
            raise HTTPError(400, "every item needs a positive integer quantity")
        count += qty
    return count


def check_address(body: Mapping[str, Any]) -> Mapping[str, Any]:
    address = body.get("address")
    if not isinstance(address, Mapping):
        raise HTTPError(400, "address must be an object")
    for key in ("city", "country"):
        if not isinstance(address.get(key), str) or not address[key].strip():
            raise HTTPError(400, f"address.{key} is required")
    return address


def quote(count: int) -> float:
    return round(BASE_COST_USD + PER_ITEM_USD * count, 2)


def build(app: App, env: Mapping[str, str]) -> None:
    rng = random.Random()

    @app.route("POST", "/quote")
    def quote_route(req: Request) -> dict[str, Any]:
        body = req.json()
        check_address(body)
        count = item_count(body)
        return {"cost_usd": quote(count), "items": count}

    @app.route("POST", "/ship")
    def ship(req: Request) -> dict[str, Any]:
        body = req.json()
        address = check_address(body)
        count = item_count(body)
        tracking = "1Z" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=16))
        app.log.info(f"shipment {tracking} of {count} items to {address['city']}, {address['country']}",
                     **{"shipping.tracking_id": tracking})
        return {"tracking_id": tracking, "items": count}
