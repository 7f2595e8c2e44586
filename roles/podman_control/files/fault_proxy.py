#!/usr/bin/env python3
"""A fault proxy for one service-to-service path: added latency, HTTP aborts, tampered bodies.

The kernel here has no netem, so path faults run in userspace: the caller's connections to the
callee are DNATed (in the caller's network namespace only) to this proxy, which forwards them
to the real callee and misbehaves on the way. One listen port per callee address:

    fault_proxy.py --map 9000=10.89.0.7:8080 --map 9001=10.89.0.8:8080 --mode delay --delay-ms 800

Modes (the shop speaks HTTP/1.1 with one request per connection, so a connection is a request):
  delay   wait delay-ms (+/- jitter-ms) before forwarding each request
  abort   answer probability p of requests itself with --status (default 503), never forwarding
  tamper  forward, then corrupt the response body of probability p of requests (same length)
Stdlib only; runs in any image with python3. Stops on SIGTERM.
"""

import argparse
import asyncio
import random
import signal
import sys

HEADER_LIMIT = 64 * 1024


async def read_request(reader):
    """The request head and body (by Content-Length), or None at EOF."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    body = await reader.readexactly(length) if length else b""
    return head + body


def tamper(response, rng):
    """Corrupt the body in place, keeping its length, so the caller receives unparseable data."""
    head, sep, body = response.partition(b"\r\n\r\n")
    if not sep or not body:
        return response
    garbled = bytes(b if rng.random() > 0.5 else rng.choice(b"#%&<>?~") for b in body)
    return head + sep + b"<" + garbled[1:]


async def handle(reader, writer, upstream, args, rng):
    try:
        try:
            request = await asyncio.wait_for(read_request(reader), 30)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        if args.mode == "abort" and rng.random() < args.probability:
            body = b'{"error":"upstream connect error or disconnect/reset before headers"}\n'
            writer.write(b"HTTP/1.1 %d Service Unavailable\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (args.status, len(body), body))
            await writer.drain()
            return
        if args.mode == "delay":
            jitter = rng.uniform(-args.jitter_ms, args.jitter_ms)
            await asyncio.sleep(max(0.0, args.delay_ms + jitter) / 1000)
        host, port = upstream
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        except (TimeoutError, OSError):
            return  # the caller sees the connection close, as it would without the proxy
        try:
            up_writer.write(request)
            await up_writer.drain()
            response = await asyncio.wait_for(up_reader.read(), 60)
        finally:
            up_writer.close()
        if args.mode == "tamper" and rng.random() < args.probability:
            response = tamper(response, rng)
        writer.write(response)
        await writer.drain()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", action="append", required=True, help="LISTENPORT=HOST:PORT")
    parser.add_argument("--mode", choices=["delay", "abort", "tamper"], required=True)
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--jitter-ms", type=float, default=0)
    parser.add_argument("--probability", type=float, default=1.0)
    parser.add_argument("--status", type=int, default=503)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    servers = []
    for item in args.map:
        listen, _, target = item.partition("=")
        host, _, port = target.rpartition(":")
        upstream = (host, int(port))
        servers.append(await asyncio.start_server(
            lambda r, w, up=upstream: handle(r, w, up, args, rng), "0.0.0.0", int(listen), limit=HEADER_LIMIT))
        print(f"fault proxy: :{listen} -> {host}:{port} mode={args.mode}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
