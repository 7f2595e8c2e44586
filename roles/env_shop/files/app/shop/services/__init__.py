"""One module per service; each exposes ``build(app, env)`` registering routes on an :class:`~shop.web.App`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from ..web import App

SERVICE_NAMES = ("frontend", "catalog", "cart", "checkout", "payment", "shipping", "email", "currency",
                 "recommendation", "ads", "loadgen")

Builder = Callable[[App, Mapping[str, str]], None]


def builder(service: str) -> Builder:
    if service not in SERVICE_NAMES:
        raise KeyError(f"unknown SHOP_SERVICE {service!r}; one of: {', '.join(SERVICE_NAMES)}")
    module = importlib.import_module(f"{__name__}.{service}")
    build: Builder = module.build
    return build
