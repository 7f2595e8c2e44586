"""OpsBench shop: a small online shop in the spirit of the OpenTelemetry Astronomy Shop.

One codebase, many services: the service is chosen by the SHOP_SERVICE environment variable and
the process is started with ``python3 -m shop``.
"""

__version__ = "0.1.0"
