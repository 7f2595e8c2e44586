#!/usr/bin/env python3
"""A fault proxy for one service-to-service path: added latency, HTTP aborts, tampered bodies.

The kernel here has no netem, so path faults run in userspace: the caller's connections to the
callee are DNATed (in the caller's network namespace only) to this proxy, which forwards them
to the real callee and misbehaves on the way. One listen port per callee address:

    fault_proxy.py --map 9000=10.89.0.7:8080 --map 9001=10.89.0.8:8080 --mode delay --delay-ms 800

Modes (the shop speaks HTTP/1.1 with one request per connection, so a connection is a request):
  delay   wait delay-ms (+/- jitter-ms) before forwarding each request; with --burst-s, only during the first
          burst-s seconds after the proxy started (one burst), or of every --burst-every seconds (bursts that
          come and go: an alert that flaps); between bursts requests pass untouched
  abort   answer probability p of requests itself with --status (default 503), never forwarding
  tamper  forward, then corrupt the response body of probability p of requests (same length)
  edge    on requests whose path matches --path-re (and --method, when given) only, one --action:
          status (answer --status itself), delay (wait delay-ms, then forward), mutate (replace --find by
          --replace in the response body), truncate (send the first --keep-bytes of the body under the
          original Content-Length, then close), drop-header (remove response header --header); with
          --segment-re, only requests whose query string or body also matches it (one customer segment: a
          currency, a country, a card brand); every other request passes untouched
  tls     the callee's ingress requires TLS (--cert, --key): a TLS client's requests are forwarded, a plaintext
          client's connection fails its handshake and is closed without an answer, as a TLS-only port does
Stdlib only; runs in any image with python3. Stops on SIGTERM.
"""

import argparse
import asyncio
import json
import random
import re
import signal
import ssl
import sys
import time

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


REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def selected(request, args):
    """Whether an edge rule applies to this request (path without the query, optional method, optional segment
    searched in the query string and the body)."""
    line = request.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = line.partition(" ")
    path, _, query = rest.rsplit(" ", 1)[0].partition("?")
    if not re.search(args.path_re, path) or (args.method and method.upper() != args.method.upper()):
        return False
    if not args.segment_re:
        return True
    body = request.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")
    return bool(re.search(args.segment_re, query + "\n" + body))


def edge_answer(status):
    """The answer of the `status` action: a JSON error of that status."""
    reason = REASONS.get(status, "Error")
    body = (json.dumps({"error": reason}) + "\n").encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (status, reason.encode(), len(body), body))


def rewrite(response, args):
    """The edge actions on a forwarded response: mutate, truncate or drop-header."""
    head, sep, body = response.partition(b"\r\n\r\n")
    if not sep:
        return response
    lines = head.split(b"\r\n")
    if args.action == "mutate":
        body = body.replace(args.find.encode(), args.replace.encode())
        lines = [ln for ln in lines if not ln.lower().startswith(b"content-length:")]
        lines.append(b"Content-Length: %d" % len(body))
    elif args.action == "truncate":
        body = body[:args.keep_bytes]  # the header still announces the whole body: the client sees it cut
    elif args.action == "drop-header":
        name = args.header.lower().encode() + b":"
        lines = [lines[0]] + [ln for ln in lines[1:] if not ln.lower().startswith(name)]
    return b"\r\n".join(lines) + sep + body


def in_burst(args, now=None):
    """Whether delay mode delays now: always without --burst-s; else during the first burst-s seconds after the
    start, or of every burst-every seconds when that is given."""
    if args.burst_s <= 0:
        return True
    elapsed = (time.monotonic() if now is None else now) - args.started
    if args.burst_every > 0:
        elapsed %= args.burst_every
    return elapsed < args.burst_s


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
        edge = args.mode == "edge" and selected(request, args)
        if edge and args.action == "status":
            writer.write(edge_answer(args.status))
            await writer.drain()
            return
        if edge and args.action == "delay":
            await asyncio.sleep(args.delay_ms / 1000)
        if args.mode == "delay" and in_burst(args):
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
        if edge and args.action in ("mutate", "truncate", "drop-header"):
            response = rewrite(response, args)
        writer.write(response)
        await writer.drain()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", action="append", required=True, help="LISTENPORT=HOST:PORT")
    parser.add_argument("--mode", choices=["delay", "abort", "tamper", "edge", "tls"], required=True)
    parser.add_argument("--path-re", default="^/")
    parser.add_argument("--segment-re", default="", help="edge mode: also match this in the query or the body")
    parser.add_argument("--cert", default="", help="tls mode: the ingress's certificate (PEM)")
    parser.add_argument("--key", default="", help="tls mode: its private key (PEM)")
    parser.add_argument("--method", default="")
    parser.add_argument("--action", choices=["status", "delay", "mutate", "truncate", "drop-header"], default="status")
    parser.add_argument("--find", default="")
    parser.add_argument("--replace", default="")
    parser.add_argument("--keep-bytes", type=int, default=0)
    parser.add_argument("--header", default="")
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--jitter-ms", type=float, default=0)
    parser.add_argument("--probability", type=float, default=1.0)
    parser.add_argument("--status", type=int, default=503)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--burst-s", type=float, default=0, help="delay mode: delay only in bursts this long")
    parser.add_argument("--burst-every", type=float, default=0, help="delay mode: a burst starts this often (s)")
    args = parser.parse_args(argv)
    args.started = time.monotonic()
    rng = random.Random(args.seed)
    tls = None
    if args.mode == "tls":
        if not args.cert or not args.key:
            parser.error("--mode=tls needs --cert and --key")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.cert, args.key)
    servers = []
    for item in args.map:
        listen, _, target = item.partition("=")
        host, _, port = target.rpartition(":")
        upstream = (host, int(port))
        servers.append(await asyncio.start_server(
            lambda r, w, up=upstream: handle(r, w, up, args, rng), "0.0.0.0", int(listen), limit=HEADER_LIMIT,
            ssl=tls, ssl_handshake_timeout=10 if tls else None))
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
