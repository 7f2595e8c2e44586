"""The reference anomaly detector for daily cost series, and anomaly importance (ITBench App. E.4).

Detector: each day's cost is compared with a seasonal baseline, the median cost of the same weekday over the whole
series given (history before the window included), so a weekly pattern, a slow trend and a few anomalous days do
not move the baseline. A day is anomalous when its relative excess over the baseline is above
``max(k * robust sigma, min_excess)``, where robust sigma is 1.4826 x the median absolute relative residual of the
series. Consecutive anomalous days form one anomaly.

Importance (ITBench App. E.4): I_a = C_a x delta_a / max_b (C_b x delta_b), with C_a the cumulative billed cost over
the anomaly's days and delta_a its duration in days.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    start: dt.date
    end: dt.date  # inclusive
    cost: float  # cumulative cost over the event's days
    excess: float  # cost above the baseline

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def to_dict(self, importance: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"start": self.start.isoformat(), "end": self.end.isoformat(), "days": self.days,
                               "cost": round(self.cost, 2), "excess": round(self.excess, 2)}
        if importance is not None:
            out["importance"] = round(importance, 6)
        return out


def _day(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value)[:10])


def detect(series: Iterable[tuple[Any, float]], window: tuple[Any, Any] | None = None, k: float = 4.0,
           min_excess: float = 0.12) -> list[Event]:
    """Anomalies of a daily series [(day, cost)], only those starting inside ``window`` (inclusive days)."""
    points = sorted((_day(d), float(v)) for d, v in series)
    if len(points) < 14:
        raise ValueError("need at least two weeks of daily costs to build a weekly baseline")
    by_weekday: dict[int, list[float]] = {}
    for d, v in points:
        by_weekday.setdefault(d.weekday(), []).append(v)
    baseline = {wd: statistics.median(vs) for wd, vs in by_weekday.items()}
    residuals = [(d, v, (v - baseline[d.weekday()]) / baseline[d.weekday()] if baseline[d.weekday()] else 0.0)
                 for d, v in points]
    sigma = 1.4826 * statistics.median(abs(r) for _, _, r in residuals)
    threshold = max(k * sigma, min_excess)
    lo, hi = (_day(window[0]), _day(window[1])) if window else (points[0][0], points[-1][0])
    events: list[Event] = []
    run: list[tuple[dt.date, float, float]] = []
    for d, v, r in [*residuals, (points[-1][0] + dt.timedelta(days=1), 0.0, 0.0)]:
        if r > threshold and lo <= d <= hi and (not run or (d - run[-1][0]).days == 1):
            run.append((d, v, v - baseline[d.weekday()]))
            continue
        if run:
            events.append(Event(run[0][0], run[-1][0], sum(x[1] for x in run), sum(x[2] for x in run)))
            run = []
        if r > threshold and lo <= d <= hi:
            run.append((d, v, v - baseline[d.weekday()]))
    return events


def importance(events: Sequence[Event]) -> list[float]:
    """ITBench's normalised importance C x duration / max, per event (same order)."""
    raw = [e.cost * e.days for e in events]
    top = max(raw, default=0.0)
    return [r / top if top > 0 else 0.0 for r in raw]


def ranked(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as dicts with their importance, most important first (ties: earlier first)."""
    scored = sorted(zip(events, importance(events), strict=True), key=lambda p: (-p[1], p[0].start))
    return [e.to_dict(i) for e, i in scored]
