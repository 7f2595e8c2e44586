"""`python -m orchestrator.gateway` as a process: url and pid files, serving, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gateway_fixtures import TOKEN, make_run_dir

from orchestrator import paths


def test_gateway_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, "http://127.0.0.1:9")
    gw_dir = run_dir / "gateway"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.gateway", "--run-dir", str(run_dir), "--port", "0",
         "--profile", "metrics-only", "--max-calls", "5", "--deadline", str(time.time() + 600)],
        cwd=paths.PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (gw_dir / "url").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no url file"
            time.sleep(0.05)
        url = (gw_dir / "url").read_text().strip()
        assert (gw_dir / "gateway.pid").read_text().strip() == str(proc.pid)
        while True:  # the url is written once bound; serving starts a moment later
            try:
                with urllib.request.urlopen(f"{url}/v1/health", timeout=5) as resp:
                    assert json.loads(resp.read()) == {"ok": True}
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        req = urllib.request.Request(f"{url}/v1/tools", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            body = json.loads(resp.read())
        assert body["profile"] == "metrics-only" and body["budget"]["max_calls"] == 5
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert not (gw_dir / "gateway.pid").exists()
    assert "serving on" in (gw_dir / "gateway.log").read_text()
