"""Debugging CLI: ``python -m orchestrator.telemetry TELEMETRY_DIR {logs,traces,trace,calls,errors} [options]``.

Prints the query result as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .store import TelemetryStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.telemetry", description=__doc__)
    parser.add_argument("telemetry_dir", type=Path)
    parser.add_argument("what", choices=["logs", "traces", "trace", "calls", "errors"])
    parser.add_argument("--service")
    parser.add_argument("--since-ns", type=int)
    parser.add_argument("--until-ns", type=int)
    parser.add_argument("--severity-min")
    parser.add_argument("--contains")
    parser.add_argument("--trace-id")
    parser.add_argument("--errors-only", action="store_true")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--offset", type=int, default=0)
    args = parser.parse_args(argv)

    window = {"since_ns": args.since_ns, "until_ns": args.until_ns}
    result: Any
    with TelemetryStore(args.telemetry_dir) as store:
        if args.what == "logs":
            result = store.search_logs(
                service=args.service,
                severity_min=args.severity_min,
                contains=args.contains,
                trace_id=args.trace_id,
                limit=args.limit or 100,
                offset=args.offset,
                **window,
            ).to_dict()
        elif args.what == "traces":
            result = store.get_traces(
                service=args.service,
                errors_only=args.errors_only,
                limit=args.limit or 20,
                offset=args.offset,
                **window,
            ).to_dict()
        elif args.what == "trace":
            if not args.trace_id:
                parser.error("trace needs --trace-id")
            result = store.get_trace(args.trace_id)
        elif args.what == "calls":
            result = store.service_calls(**window)
        else:
            result = store.error_summary(**window)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
