#!/usr/bin/env python3
"""Extra HTTP traffic from a helper container on a run's network: a load spike or a stream of stray requests.

    traffic.py --base http://catalog:8080 --path /products --rate 8 --duration 90

Sends `rate` requests per second (evenly spaced, each in its own thread, at most --max-inflight at once) to
`base` + one of the paths (round robin) until `duration` seconds have passed (0: until SIGTERM). Every answer,
error and timeout is ignored: the traffic is what matters, as from a batch client or a crawler. A path may start
with a method ("POST /send"). Stdlib only; runs in any image with python3.
"""

import argparse
import itertools
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


def send(base, item, timeout, slots):
    method, _, path = item.partition(" ") if " " in item else ("GET", "", item)
    req = urllib.request.Request(base + path, method=method, data=b"{}" if method in ("POST", "PUT") else None,
                                 headers={"Content-Type": "application/json", "User-Agent": "batch-client/1.4"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
    except (urllib.error.URLError, OSError, ValueError):
        pass
    finally:
        slots.release()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="http://host:port")
    parser.add_argument("--path", action="append", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--duration", type=float, default=0, help="seconds; 0 runs until SIGTERM")
    parser.add_argument("--timeout", type=float, default=5)
    parser.add_argument("--max-inflight", type=int, default=32)
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    slots = threading.BoundedSemaphore(args.max_inflight)
    paths = itertools.cycle(args.path)
    start = time.monotonic()
    print(f"traffic: {args.rate}/s to {args.base} {args.path} for {args.duration or 'ever'} s", flush=True)
    for n in itertools.count():
        offset = n / args.rate  # from the start, not (start + offset) - start: that rounds either side of the end
        if args.duration and offset >= args.duration:
            break
        due = start + offset
        if stop.wait(max(0.0, due - time.monotonic())):
            break
        if slots.acquire(blocking=False):  # the target is too slow to keep up: skip rather than pile up
            threading.Thread(target=send, args=(args.base, next(paths), args.timeout, slots), daemon=True).start()
    print("traffic: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
