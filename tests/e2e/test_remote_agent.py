"""A remote agent over the HTTP agent API (ITBench's flow): it polls until the manifest is ready,
reports started, works through the run's tool gateway, uploads its output and reports finished."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths
from orchestrator.agents.gateway_client import GatewayClient
from orchestrator.agents.heuristic import run

from .conftest import OPSBENCH, cli_env

pytestmark = pytest.mark.e2e
KEY = "remote-agent-key-0123456789"


def api(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_remote_agent_diagnoses_through_the_agent_api(home: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([*OPSBENCH, "run", "loopweb-web-down", "--remote-agent", str(port), "--json"],
                            env=cli_env(home, OPSBENCH_AGENT_API_KEY=KEY), cwd=paths.PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, manifest = time.monotonic() + 400, None
        while time.monotonic() < deadline and proc.poll() is None:
            code, body = api(f"{base}/v1/manifest")
            if code == 200:
                manifest = body
                break
            assert code in (0, 409), (code, body)  # not listening yet, or waiting for the handover
            time.sleep(1)
        assert manifest is not None, "the manifest never became ready"
        assert "ground_truth" not in json.dumps(manifest) and manifest["token"]
        assert api(f"{base}/v1/status", "POST", {"state": "started"})[0] == 200
        output = run(manifest, GatewayClient(manifest["tools"]["url"], manifest["token"]))
        assert api(f"{base}/v1/output", "PUT", output)[0] == 200
        assert api(f"{base}/v1/status", "POST", {"state": "finished"})[0] == 200
        stdout, stderr = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["agent"]["status"] == "exited"
    assert result["evaluations"]["diagnosis"]["fl_pass"] == 1.0
    assert result["cleanup"] == "done"
    events = [json.loads(line)["event"] for line in
              (Path(result["run_dir"]) / "agent" / "agent-api.jsonl").read_text().splitlines()]
    assert events == ["manifest", "started", "output", "finished"]
    assert api(f"{base}/v1/manifest")[0] == 0  # the API is gone with the run
