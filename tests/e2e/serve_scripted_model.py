"""A scripted model server on the host, for trying a preset by hand on a live scenario (no real model needed):

    .venv/bin/python -m tests.e2e.serve_scripted_model --port 8765 &
    GEMINI_API_KEY=x GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8765 opsbench run shop-cart-down --agent gemini-cli
    (Claude Code: ANTHROPIC_BASE_URL=http://127.0.0.1:8765; Codex, OpenCode: OPENAI_BASE_URL=http://127.0.0.1:8765/v1)

It speaks every preset's protocol (tests/e2e/model_scripts.py) and drives the CLI through one investigation: the
gateway's get_alerts, get_topology and query_metrics over MCP, then the answer (``--answer FILE``, default: the
diagnosis of shop-cart-down, cart-1 down) written with the CLI's own shell. It prints each request's path as it
comes, and on SIGINT or SIGTERM the usage it reported for each answer, then stops.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import Any

from tests.e2e.bench_agents import ANSWER, INVESTIGATE
from tests.e2e.model_scripts import Say, ScriptedModel, Shell


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--answer", type=Path, help="the answer (JSON) the CLI writes (default: shop-cart-down's)")
    args = parser.parse_args()
    answer: dict[str, Any] = json.loads(args.answer.read_text()) if args.answer else ANSWER
    script = [*INVESTIGATE, Shell("cat > answer.json <<'EOF'\n" + json.dumps(answer) + "\nEOF"),
              Say("The diagnosis is in answer.json.")]
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ScriptedModel(script, port=args.port) as model:
        print(f"scripted model at {model.url}", flush=True)
        seen = 0
        while not stop.wait(0.5):
            for request in model.log.requests[seen:]:
                print(f"POST {request['path']}", flush=True)
                seen += 1
        print(f"answered {len(model.log.usages)} generation request(s), {model.log.background} outside the script; "
              f"usage reported: {json.dumps(model.log.usages)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
