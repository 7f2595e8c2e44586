"""The helpers the distractor and noise roles run in their containers, run here on the host: the fault proxy's delay
bursts (noise_alert_flap) and the traffic helper (fault_benign_load_spike, noise_log_warnings)."""

from __future__ import annotations

import argparse
import importlib.util
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

from orchestrator import paths


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PROXY = _load(paths.ROLES_DIR / "podman_control" / "files" / "fault_proxy.py")
TRAFFIC = _load(paths.ROLES_DIR / "podman_traffic" / "files" / "traffic.py")


def _args(burst_s: float, burst_every: float) -> argparse.Namespace:
    return argparse.Namespace(burst_s=burst_s, burst_every=burst_every, started=100.0)


def test_without_bursts_delay_mode_always_delays() -> None:
    assert all(PROXY.in_burst(_args(0, 0), now) for now in (100.0, 150.0, 10_000.0))
    assert all(PROXY.in_burst(_args(0, 60), now) for now in (100.0, 175.0))  # a period alone changes nothing


def test_one_burst_then_never_again() -> None:
    args = _args(30, 0)
    assert [PROXY.in_burst(args, 100.0 + t) for t in (0, 29.9, 30, 60, 1000)] == [True, True, False, False, False]


def test_bursts_repeat_every_period() -> None:
    args = _args(30, 75)
    seen = [PROXY.in_burst(args, 100.0 + t) for t in (0, 29, 31, 74, 75, 104, 106, 150, 151)]
    assert seen == [True, True, False, False, True, True, False, True, True]


def test_the_traffic_helper_sends_each_path_with_its_method_and_ignores_errors() -> None:
    got: list[tuple[str, str]] = []
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            got.append((self.command, self.path))
            if len(got) >= 6:
                done.set()
            self.send_response(404 if "missing" in self.path else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        # 6 requests at 50/s (at 0, 0.02 ... 0.10 s): the helper stops at its duration (0.11 s), whatever the answers
        # were.
        rc = TRAFFIC.main([f"--base={base}", "--path=/ok", "--path=POST /send", "--path=/missing", "--rate=50",
                           "--duration=0.11", "--timeout=2"])
        assert rc == 0
        assert done.wait(5), got
    finally:
        server.shutdown()
    # Round robin over the paths (the requests run in threads, so they may arrive in any order).
    assert sorted(got) == sorted([("GET", "/ok"), ("POST", "/send"), ("GET", "/missing")] * 2)
