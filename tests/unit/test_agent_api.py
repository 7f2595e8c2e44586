"""The HTTP agent API for remote agents: key auth, the manifest's readiness, status, output upload."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from orchestrator.agent_api import AgentAPI, wait_for_remote

KEY = "k" * 24


def call(url: str, method: str = "GET", body: Any = None, key: str | None = KEY) -> tuple[int, Any]:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_flow_waiting_ready_started_output_finished_closed(tmp_path: Path) -> None:
    with AgentAPI(KEY) as api:
        assert call(f"{api.url}/v1/health", key=None) == (200, {"ok": True})
        assert call(f"{api.url}/v1/manifest", key="wrong-key-wrong-key")[0] == 401
        code, body = call(f"{api.url}/v1/manifest")
        assert (code, body["state"]) == (409, "waiting")
        assert call(f"{api.url}/v1/status", "POST", {"state": "started"})[0] == 409  # nothing to start yet

        api.ready({"run": "r1", "output": {"path": "/elsewhere"}}, "gw-token", tmp_path / "output.json")
        code, manifest = call(f"{api.url}/v1/manifest")
        assert code == 200 and manifest["token"] == "gw-token" and manifest["output"]["upload"].endswith("/v1/output")
        assert call(f"{api.url}/v1/status", "POST", {"state": "started"}) == (200, {"ok": True})
        assert call(f"{api.url}/v1/status", "POST", {"state": "bored"})[0] == 400
        assert call(f"{api.url}/v1/output", "PUT", {"entities": []}) == (200, {"ok": True})
        assert json.loads((tmp_path / "output.json").read_text()) == {"entities": []}
        assert call(f"{api.url}/v1/status", "POST", {"state": "finished", "detail": "done"})[0] == 200
        assert wait_for_remote(api, 5, lambda: False) == ("exited", "done")
        events = [e["event"] for e in api.state.events]
        assert events == ["unauthorized", "manifest", "started", "output", "finished"]
        api.close()
        api.close()  # idempotent


def test_budget_and_interrupt_end_the_wait() -> None:
    with AgentAPI(KEY) as api:
        status, detail = wait_for_remote(api, 0, lambda: False)
        assert status == "timeout" and "never reported started" in detail
        assert wait_for_remote(api, 60, lambda: True)[0] == "interrupted"


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="16 characters"):
        AgentAPI("short")


def test_the_runner_sees_a_finish_reported_from_another_thread(tmp_path: Path) -> None:
    with AgentAPI(KEY) as api:
        api.ready({"run": "r1"}, "t", tmp_path / "o.json")

        def agent() -> None:
            time.sleep(0.3)
            call(f"{api.url}/v1/status", "POST", {"state": "finished"})

        threading.Thread(target=agent).start()
        assert wait_for_remote(api, 10, lambda: False)[0] == "exited"
