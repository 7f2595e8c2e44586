"""Time and duration arguments as agents write them: Unix seconds, RFC 3339, `now`, or relative (`15m`, `now-15m`)."""

from __future__ import annotations

import math
import re
from datetime import datetime

from .errors import invalid

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
TIME_HELP = "Unix seconds, RFC 3339 (2024-05-01T12:00:00Z), 'now', or relative to now ('15m', 'now-15m', '-1h')"
DURATION_HELP = "seconds, or a number with a unit: 500ms, 15s, 5m, 1h"
MAX_SECONDS = 9_000_000_000.0
"""Times and durations must fit 64-bit nanoseconds (Unix time before the year 2255): found by fuzzing, a larger
number reached DuckDB and came back as a backend error instead of an invalid argument."""


def parse_duration(field: str, value: str | float) -> float:
    """Seconds (> 0) from a number or '15s'-style text."""
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(value)
        if not match:
            raise invalid(field, f"{value!r} is not a duration ({DURATION_HELP})")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise invalid(field, "must be a positive duration")
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise invalid(field, f"must be at most {MAX_SECONDS:.0f} seconds")
    return seconds


def parse_time(field: str, value: str | float, now: float) -> float:
    """Unix seconds from any accepted form (see TIME_HELP)."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise invalid(field, "must be >= 0 (Unix seconds)")
        if not math.isfinite(value) or value > MAX_SECONDS:
            raise invalid(field, f"must be a Unix time of at most {MAX_SECONDS:.0f} seconds")
        return float(value)
    text = value.strip()
    if text == "now":
        return now
    relative = text.removeprefix("now").removeprefix("-").strip()
    if _DURATION.match(relative):
        return now - parse_duration(field, relative)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise invalid(field, f"{value!r} is not a time ({TIME_HELP})") from None
    if parsed.tzinfo is None:
        raise invalid(field, f"{value!r} has no time zone; add Z or an offset")
    if parsed.timestamp() > MAX_SECONDS:
        raise invalid(field, f"{value!r} is after the latest accepted time ({MAX_SECONDS:.0f} Unix seconds)")
    return parsed.timestamp()


def to_ns(seconds: float) -> int:
    return round(seconds * 1e9)
