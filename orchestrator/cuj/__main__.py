"""``python -m orchestrator.cuj``: run critical user journeys in Chromium and write their capture.

    python -m orchestrator.cuj run --base-url URL --out DIR [--journey NAME]... [--journeys-file FILE]
                                   [--timeout S] [--action-timeout S] [--chromium PATH] [--json]
    python -m orchestrator.cuj list [--journeys-file FILE] [--json]

``run`` prints a line per step on stderr, and with ``--json`` the index (cuj.json) on stdout. Exit code: 0 every
journey passed, 1 some journey failed, 2 a journey errored or the run timed out, or the run could not start.
``--journeys-file`` runs journeys given as data (a JSON list of journeys, see journeys.py) instead of the shop's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import CujError
from .journeys import SHOP_JOURNEYS, Journey, journeys_from, select_journeys
from .runner import DEFAULT_ACTION_TIMEOUT, DEFAULT_CHROMIUM, DEFAULT_TIMEOUT, run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.cuj",
                                     description="Critical user journeys in a real browser, with captures.")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run journeys against a site and write the capture")
    r.add_argument("--base-url", required=True, help="the site, e.g. http://127.0.0.1:8080 (loopback only)")
    r.add_argument("--out", required=True, type=Path, help="capture directory (new, empty, or a previous capture)")
    r.add_argument("--journey", action="append", default=[], metavar="NAME", help="run only these (repeatable)")
    r.add_argument("--journeys-file", type=Path, help="a JSON list of journeys to use instead of the shop's")
    r.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="overall timeout, seconds (%(default)s)")
    r.add_argument("--action-timeout", type=float, default=DEFAULT_ACTION_TIMEOUT,
                   help="per action and assertion, seconds (%(default)s)")
    r.add_argument("--chromium", default=DEFAULT_CHROMIUM, help="the Chromium executable (%(default)s)")
    r.add_argument("--json", action="store_true", help="print the index (cuj.json) on stdout")
    ls = sub.add_parser("list", help="list the journeys and their steps")
    ls.add_argument("--journeys-file", type=Path)
    ls.add_argument("--json", action="store_true")
    sub.add_parser("_worker", help=argparse.SUPPRESS)
    return parser


def _known(journeys_file: Path | None) -> dict[str, Journey]:
    if journeys_file is None:
        return dict(SHOP_JOURNEYS)
    try:
        data: Any = json.loads(journeys_file.read_text())
    except (OSError, ValueError) as exc:
        raise CujError(f"cannot read journeys from {journeys_file}: {exc}") from None
    if not isinstance(data, list):
        raise CujError(f"{journeys_file}: expected a JSON list of journeys")
    return {j.name: j for j in journeys_from(data)}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "_worker":
        from .worker import main as worker_main

        return worker_main()
    try:
        known = _known(args.journeys_file)
        if args.command == "list":
            if args.json:
                print(json.dumps([j.to_dict() for j in known.values()], indent=1))
            else:
                for j in known.values():
                    print(f"{j.name}: {j.description}")
                    for i, name in enumerate(j.step_names(), 1):
                        print(f"  {i}. {name}")
            return 0
        chosen = select_journeys(args.journey, known)
        result = run(args.base_url, args.out, chosen, timeout=args.timeout, action_timeout=args.action_timeout,
                     chromium=args.chromium, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except CujError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    for j in result.index["journeys"]:
        print(f"{j['name']}: {j['status']}" + (f" - {j['message']}" if j.get("message") else ""), file=sys.stderr)
    if result.leftovers:
        print(f"warning: processes left after the run: {result.leftovers}", file=sys.stderr)
    print(f"capture: {result.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.index, indent=1))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
