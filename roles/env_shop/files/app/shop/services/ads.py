"""ads: ``/ads?context=cat1,cat2`` returns text ads for the categories (random ones without context).

Flags: adServiceHighCpu (100-200 ms busy loop per request, or the variant's number in ms), adServiceManualGc
(a process-wide lock held ~1 s every 5th request, at most once per 2 s, like a stop-the-world GC: every
request stalls behind it), adServiceFailure (500 for 10% of requests, or the variant's number as the rate).
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..web import App, HTTPError, Request

ADS: dict[str, list[dict[str, str]]] = {
    "telescopes": [
        {"text": "Explorascope: see Saturn's rings tonight, 10% off.", "redirect_url": "/product/OLJCESPC7Z"},
        {"text": "Starsense Explorer: your phone finds the stars.", "redirect_url": "/product/66VCHSJNUP"},
    ],
    "binoculars": [{"text": "Roof Binoculars: bright, sharp, waterproof.", "redirect_url": "/product/2ZYFJ3GM2N"}],
    "accessories": [
        {"text": "Keep your optics clean: Lens Cleaning Kit.", "redirect_url": "/product/L9ECAV7KIM"},
        {"text": "Safe sun viewing with the Solar Filter.", "redirect_url": "/product/6E92ZMYYFZ"},
    ],
    "flashlights": [{"text": "Red Flashlight: protect your night vision.", "redirect_url": "/product/LS4PSXUNUM"}],
    "assembly": [{"text": "Go big: the 8-inch Optical Tube Assembly.", "redirect_url": "/product/9SIQT8TOJO"}],
    "travel": [{"text": "Chase the next eclipse with the Eclipsmart.", "redirect_url": "/product/1YMWWN1N4O"}],
    "books": [{"text": "The Comet Book: 99 cents of wonder.", "redirect_url": "/product/HQTGWGPNH4"}],
}
ALL_ADS = [ad for ads in ADS.values() for ad in ads]
MAX_ADS = 2
GC_EVERY = 5
GC_PAUSE_SECONDS = 1.0
GC_MIN_INTERVAL = 2.0  # keeps the service pausing rather than permanently stalled under load
FAILURE_RATE_DEFAULT = 0.1
HIGH_CPU_MAX_MS = 60000.0


def burn_cpu(seconds: float) -> int:
    """Busy loop until this thread has used ``seconds`` of CPU time; returns the iteration count.

    CPU time rather than wall time: on a contended CPU the request takes longer, as real work would.
    """
    end = time.thread_time() + seconds
    n = 0
    x = 1
    while time.thread_time() < end:
        for _ in range(1000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        n += 1
    return n


def select_ads(context: list[str], rng: random.Random) -> list[dict[str, str]]:
    pool = [ad for cat in context for ad in ADS.get(cat, [])]
    if not pool:
        pool = ALL_ADS
    unique = list({ad["text"]: ad for ad in pool}.values())
    return rng.sample(unique, min(MAX_ADS, len(unique)))


def build(app: App, env: Mapping[str, str]) -> None:
    rng = random.Random()
    flags = app.flags
    world_lock = threading.Lock()  # "stop the world": every request passes through it
    counter_lock = threading.Lock()
    counter = [0]
    last_pause = [float("-inf")]

    def manual_gc() -> None:
        with counter_lock:
            counter[0] += 1
            pause = counter[0] >= GC_EVERY and time.monotonic() - last_pause[0] >= GC_MIN_INTERVAL
            if pause:
                counter[0] = 0
                last_pause[0] = time.monotonic()
        if pause:
            with world_lock:
                start = time.perf_counter()
                collected = gc.collect()
                time.sleep(max(0.0, GC_PAUSE_SECONDS - (time.perf_counter() - start)))
                took = time.perf_counter() - start
            app.log.info(f"full garbage collection: {collected} objects collected, paused {took * 1000:.0f} ms",
                         **{"gc.collected": collected, "gc.pause_ms": round(took * 1000, 1)})
        else:
            with world_lock:
                pass

    @app.route("GET", "/ads")
    def ads(req: Request) -> dict[str, Any]:
        if flags.enabled("adServiceManualGc"):
            manual_gc()
        else:
            with world_lock:
                pass
        cpu_ms = flags.number("adServiceHighCpu", 0.0)  # 0.0: true or a word, not a positive number
        if cpu_ms is not None:
            burn_cpu(min(cpu_ms, HIGH_CPU_MAX_MS) / 1000.0 if cpu_ms > 0 else rng.uniform(0.1, 0.2))
        rate = flags.fraction("adServiceFailure", FAILURE_RATE_DEFAULT)
        if rate > 0 and rng.random() < rate:
            raise HTTPError(500, "failed to retrieve ads: ad index unavailable")
        context = [c.strip().lower() for c in req.query.get("context", "").split(",") if c.strip()]
        return {"ads": select_ads(context, rng)}
