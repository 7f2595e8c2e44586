"""The minimal example agent (docs/agents.md) runs as documented against a gateway speaking the REST contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchestrator import paths


def test_minimal_agent_blames_the_first_critical_alert(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            alerts = [{"labels": {"alertname": "ServiceErrorRateHigh", "service": "frontend", "severity": "warning"}},
                      {"labels": {"alertname": "ServiceDown", "service": "cart", "instance_id": "cart-1",
                                  "severity": "critical"}}]
            body = json.dumps({"ok": True, "result": {"items": alerts, "total": 2}, "next_page": None}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "token").write_text("t0k\n")
        (tmp_path / "manifest.json").write_text(json.dumps({
            "tools": {"url": f"http://127.0.0.1:{server.server_port}"}, "token_file": str(tmp_path / "token")}))
        env = {**os.environ, "OPSBENCH_MANIFEST": str(tmp_path / "manifest.json"),
               "OPSBENCH_OUTPUT": str(tmp_path / "output.json")}
        proc = subprocess.run([sys.executable, "-m", "orchestrator.agents.minimal"], env=env, capture_output=True,
                              text=True, timeout=60, cwd=paths.PROJECT_ROOT, check=False)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert seen == [("/v1/tools/get_alerts", "Bearer t0k")]
    output = json.loads((tmp_path / "output.json").read_text())
    assert output["entities"] == [{"id": "cart-1", "root_cause": True}]
    assert output["alerts_explained"] == ["ServiceDown", "ServiceErrorRateHigh"]
