"""Run one run's gateway: ``python -m orchestrator.gateway --run-dir DIR --port PORT``.

Binds first (port 0 picks a free one), then writes `<run dir>/gateway/url` and `gateway.pid`, so whoever started it
can wait for the url file and connect. SIGTERM and SIGINT stop it cleanly (uvicorn finishes in-flight requests);
the pid file is removed on the way out. Logs (refused tokens and scope denials included) go to
`<run dir>/gateway/gateway.log` and stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import uvicorn

from .context import GatewayOptions, load_context
from .dispatch import Gateway
from .rest import create_app
from .tools import PROFILES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="the run's directory (holds environment.json)")
    parser.add_argument("--port", type=int, required=True, help="TCP port; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--profile", default="full", choices=sorted(PROFILES))
    parser.add_argument("--max-calls", type=int, default=None, help="refuse calls after this many")
    parser.add_argument("--deadline", type=float, default=None, help="refuse calls after this Unix time")
    parser.add_argument("--since", type=float, default=None,
                        help="Unix time before which no logs, traces or metrics are shown (shared environments)")
    parser.add_argument("--run-id", default=None, help="default: the run directory's name")
    parser.add_argument("--hide", action="append", default=[], choices=["metrics", "traces", "logs"],
                        help="an evidence family the scenario masks (repeatable)")
    return parser.parse_args(argv)


def _logging(log_file: Path) -> None:
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in (logging.FileHandler(log_file), logging.StreamHandler(sys.stderr)):
        handler.setFormatter(fmt)
        root.addHandler(handler)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir = args.run_dir.resolve()
    options = GatewayOptions(profile=args.profile, max_calls=args.max_calls, deadline=args.deadline,
                             hidden_families=tuple(args.hide), visible_since=args.since)
    ctx = load_context(run_dir, options, run_id=args.run_id)
    ctx.gateway_dir.mkdir(parents=True, exist_ok=True)
    _logging(ctx.gateway_dir / "gateway.log")
    gateway = Gateway(ctx)
    app = create_app(gateway, host=args.host)

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:  # the run's port taken since its block was chosen: one line for the handover to show
        sock.close()
        ctx.close()
        logging.getLogger("opsbench.gateway").error("cannot listen on %s:%d: %s", args.host, args.port,
                                                    exc.strerror or exc)
        return 2
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    pid_file = ctx.gateway_dir / "gateway.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    (ctx.gateway_dir / "url").write_text(f"http://{host}:{port}\n")
    logging.getLogger("opsbench.gateway").info("run %s, profile %s, serving on http://%s:%d", ctx.run_id,
                                               args.profile, host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="info", access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=5))
    stopped: list[int] = []
    # uvicorn handles SIGTERM/SIGINT itself (graceful shutdown), then re-raises the signal to the handler that was
    # in place before; this one records it, so the clean-up below runs and the exit code is 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopped.append(signum))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        ctx.close()
        pid_file.unlink(missing_ok=True)
    logging.getLogger("opsbench.gateway").info("stopped%s", f" by signal {stopped[0]}" if stopped else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
