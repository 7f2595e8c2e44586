"""``python3 -m shop``: run the service named by SHOP_SERVICE on SHOP_HOST:SHOP_PORT (default 0.0.0.0:8080)."""

from __future__ import annotations

import os
import sys

from .flags import Flags
from .services import SERVICE_NAMES, builder
from .telemetry import from_env
from .web import App, RateLimiter


def main() -> int:
    service = os.environ.get("SHOP_SERVICE", "")
    if service not in SERVICE_NAMES:
        print(f"SHOP_SERVICE must be one of: {', '.join(SERVICE_NAMES)} (got {service!r})", file=sys.stderr)
        return 2
    host = os.environ.get("SHOP_HOST") or "0.0.0.0"
    port = int(os.environ.get("SHOP_PORT") or 8080)
    telemetry = from_env(service)
    app = App(service, telemetry)
    try:
        app.rate_limiter = RateLimiter.from_env(os.environ)
    except ValueError as exc:
        print(f"invalid rate limit: {exc}", file=sys.stderr)
        return 2
    app.flags = Flags(os.environ.get("FLAGS_FILE"), on_change=app.on_flag_change, on_error=app.on_flag_error)
    builder(service)(app, os.environ)
    try:
        app.run(host, port)
    except OSError as exc:
        telemetry.logger.error(f"{service} cannot serve on {host}:{port}: {exc}")
        telemetry.shutdown()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
