"""payment: POST /charge {amount, currency, card} -> transaction id; card numbers must pass Luhn.

A charge that carries ``X-Request-Time`` (the caller's clock, Unix seconds; checkout sends it, as a signed request
to a payment provider would) is refused with 401 when that time is more than PAYMENT_MAX_CLOCK_SKEW seconds
(default 300, like a provider's replay window; 0 = no check) from payment's own clock: a caller whose clock is
wrong cannot charge.

Flag: paymentServiceFailure (charges fail with 500 at the variant's rate; true means 1.0).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..data import luhn_valid
from ..web import App, HTTPError, Request
from .common import require_number

MAX_CLOCK_SKEW_DEFAULT = 300.0


def card_number(card: object) -> str:
    if isinstance(card, Mapping):
        card = card.get("number", card.get("credit_card_number"))
    if not isinstance(card, str | int) or isinstance(card, bool):
        raise HTTPError(400, "missing card number")
    return str(card)


def build(app: App, env: Mapping[str, str]) -> None:
    rng = random.Random()
    flags = app.flags
    max_skew = float(env.get("PAYMENT_MAX_CLOCK_SKEW") or MAX_CLOCK_SKEW_DEFAULT)

    def check_request_time(req: Request) -> None:
        raw = req.headers.get("x-request-time")
        if raw is None or max_skew <= 0:
            return
        try:
            sent = float(raw)
        except ValueError:
            raise HTTPError(400, f"invalid X-Request-Time: {raw[:40]!r}") from None
        skew = sent - time.time()
        if abs(skew) > max_skew:
            raise HTTPError(401, f"request time outside the allowed window: X-Request-Time is {skew:+.0f} s from "
                                 f"payment's clock (allowed +/-{max_skew:g} s); check the caller's clock")

    @app.route("POST", "/charge")
    def charge(req: Request) -> dict[str, Any]:
        check_request_time(req)
        body = req.json()
        amount = require_number(body.get("amount"), "amount")
        if amount <= 0:
            raise HTTPError(400, "amount must be positive")
        currency = body.get("currency")
        if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha():
            raise HTTPError(400, "currency must be a 3-letter code")
        number = card_number(body.get("card"))
        if not luhn_valid(number):
            raise HTTPError(400, "invalid card number")
        rate = flags.fraction("paymentServiceFailure", 1.0)
        if rate > 0 and rng.random() < rate:
            raise HTTPError(500, "charge failed: payment gateway rejected the request (invalid token)")
        transaction_id = str(uuid.uuid4())
        app.log.info(f"charged {amount:.2f} {currency.upper()} to card ending {number[-4:]}",
                     **{"payment.transaction_id": transaction_id, "payment.amount": amount,
                        "payment.currency": currency.upper()})
        return {"transaction_id": transaction_id, "amount": amount, "currency": currency.upper()}
