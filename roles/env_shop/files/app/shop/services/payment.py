"""payment: POST /charge {amount, currency, card} -> transaction id; card numbers must pass Luhn.

Flag: paymentServiceFailure (charges fail with 500 at the variant's rate; true means 1.0).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

from ..data import luhn_valid
from ..web import App, HTTPError, Request
from .common import require_number


def card_number(card: object) -> str:
    if isinstance(card, Mapping):
        card = card.get("number", card.get("credit_card_number"))
    if not isinstance(card, str | int) or isinstance(card, bool):
        raise HTTPError(400, "missing card number")
    return str(card)


def build(app: App, env: Mapping[str, str]) -> None:
    rng = random.Random()
    flags = app.flags

    @app.route("POST", "/charge")
    def charge(req: Request) -> dict[str, Any]:
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
